#include "perf/table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::perf {
namespace {

// nccl-tests' header lines are 118 characters of columns (plus a trailing space on the last two);
// -P's (or --compression's) columns continue from there.
constexpr size_t kColumnsWidth = 118;
constexpr char kPredictionCells[] = "  %12s  %7s  %6s  %6s";
constexpr char kWireCells[] = "  %12s  %7s";

std::string WithPrediction(std::string line, const std::string& cells) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  line.resize(kColumnsWidth, ' ');
  return absl::StrCat(line, cells, " ");
}

std::string NumberOrNa(std::optional<double> value, int width) {
  return value.has_value() ? FormatNumber(*value, width) : "N/A";
}

}  // namespace

std::string FormatNumber(double value, int width) {
  // Digits of the integer part; capped so infinities and huge values end the count.
  int power = 0;
  for (double limit = 1; value >= limit && power <= 20; limit *= 10) ++power;
  if (power < width - 2) return absl::StrFormat("%*.2f", width, value);
  if (power < width - 1) return absl::StrFormat("%*.1f", width, value);
  if (power < width + 1) return absl::StrFormat("%*.0f", width, value);
  if (width >= 7) return absl::StrFormat("%*.1e", width, value);
  return absl::StrFormat("%*.0e", width, value);
}

std::string ResultHeader(bool cputime, bool predicted, bool variants, bool compressed) {
  const char* time = cputime ? "cputime" : "time";
  std::string lines[3] = {
      absl::StrFormat(
          "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place   "
          "       ",
          "", "", "", "", ""),
      absl::StrFormat("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ",
                      "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong",
                      time, "algbw", "busbw", "#wrong"),
      absl::StrFormat("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ", "(B)",
                      "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                      "(GB/s)", "")};
  if (predicted) {
    lines[0] = WithPrediction(
        lines[0], absl::StrFormat("  %21s  %14s", "tuner's prediction", "measured/pred."));
    lines[1] = WithPrediction(
        lines[1], absl::StrFormat(kPredictionCells, "algorithm", "time", "out-pl", "in-pl"));
    lines[2] = WithPrediction(lines[2], absl::StrFormat(kPredictionCells, "", "(us)", "", ""));
  }
  if (compressed) {
    lines[0] = WithPrediction(lines[0], absl::StrFormat("  %21s", "compressed, per op"));
    lines[1] = WithPrediction(lines[1], absl::StrFormat(kWireCells, "wire", "ratio"));
    lines[2] = WithPrediction(lines[2], absl::StrFormat(kWireCells, "(B)", ""));
  }
  if (variants) {
    // In place of the space -P's header lines end with, so the names start under "variant".
    lines[1].pop_back();
    lines[1] += RowVariant("variant");
  }
  return absl::StrCat("#\n", lines[0], "\n", lines[1], "\n", lines[2], "\n");
}

std::string RowPreamble(int64_t bytes, int64_t count, const char* type, const char* redop,
                        int root) {
  return absl::StrFormat("%12li  %12li  %8s  %6s  %6i", bytes, count, type, redop, root);
}

std::string RowHalf(double time_us, double algbw, double busbw, std::optional<int64_t> wrong) {
  std::string half = absl::StrFormat("  %7s  %6s  %6s", FormatNumber(time_us, 7),
                                     FormatNumber(algbw, 6), FormatNumber(busbw, 6));
  if (wrong.has_value()) {
    absl::StrAppendFormat(&half, "  %6g", static_cast<double>(*wrong));
  } else {
    absl::StrAppendFormat(&half, "  %6s", "N/A");
  }
  return half;
}

std::string RowPrediction(const std::string& algorithm, std::optional<double> predicted_us,
                          std::optional<double> out_of_place_ratio,
                          std::optional<double> in_place_ratio) {
  return absl::StrFormat(kPredictionCells, algorithm, NumberOrNa(predicted_us, 7),
                         NumberOrNa(out_of_place_ratio, 6), NumberOrNa(in_place_ratio, 6));
}

std::string RowWire(uint64_t wire_bytes, uint64_t uncompressed_bytes) {
  const std::string ratio =
      uncompressed_bytes == 0
          ? "N/A"
          : absl::StrFormat("%.4f", static_cast<double>(wire_bytes) / uncompressed_bytes);
  return absl::StrFormat(kWireCells, absl::StrCat(wire_bytes), ratio);
}

std::string RowVariant(const std::string& variant) { return absl::StrCat("  ", variant); }

bool BandwidthOk(double average_busbw, double min_bw) { return average_busbw >= 0.9 * min_bw; }

std::string Footer(int out_of_bounds, double average_busbw, std::optional<double> min_bw,
                   const std::string& program) {
  std::string footer = absl::StrFormat("# %-20s : %d %s\n", "Out of bounds values", out_of_bounds,
                                       out_of_bounds ? "FAILED" : "OK");
  const char* verdict = !min_bw ? "" : BandwidthOk(average_busbw, *min_bw) ? "OK" : "FAILED";
  absl::StrAppendFormat(&footer, "# %-20s : %g %s\n", "Avg bus bandwidth", average_busbw, verdict);
  absl::StrAppend(&footer, "#\n# Collective test concluded: ", program, "\n#\n");
  return footer;
}

}  // namespace weft::perf
