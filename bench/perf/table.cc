#include "perf/table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::perf {

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

std::string ResultHeader(bool cputime) {
  const char* time = cputime ? "cputime" : "time";
  std::string header = "#\n";
  absl::StrAppendFormat(
      &header,
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place   "
      "       \n",
      "", "", "", "", "");
  absl::StrAppendFormat(&header,
                        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n",
                        "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong",
                        time, "algbw", "busbw", "#wrong");
  absl::StrAppendFormat(
      &header, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
      "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return header;
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
