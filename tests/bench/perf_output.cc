#include "perf_output.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace weft::testing {

const char* const kResultHeader[3] = {
    "#                                                              out-of-place                 "
    "      in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
    "time   algbw   busbw  #wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
    "(us)  (GB/s)  (GB/s)         ",
};

const char* const kResultHeaderCputime =
    "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  "
    "cputime   algbw   busbw  #wrong ";

// nccl-tests' columns (the first line padded to their 118 characters), then -P's four:
// "  %12s  %7s  %6s  %6s" and the trailing space.
const char* const kPredictedHeader[3] = {
    "#                                                              out-of-place               "
    "        in-place                 tuner's prediction  measured/pred. ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
    "time   algbw   busbw  #wrong     algorithm     time  out-pl   in-pl ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
    "(us)  (GB/s)  (GB/s)                           (us)                 ",
};

// -V: the middle line with the variant's column in place of the trailing space.
const char* const kVariantsHeader =
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
    "time   algbw   busbw  #wrong     algorithm     time  out-pl   in-pl  variant";

// nccl-tests' columns (the first line padded to their 118 characters), then "  %12s  %7s" and
// the trailing space.
const char* const kCompressedHeader[3] = {
    "#                                                              out-of-place               "
    "        in-place                 compressed, per op ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
    "time   algbw   busbw  #wrong          wire    ratio ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
    "(us)  (GB/s)  (GB/s)                   (B)          ",
};

namespace {

constexpr int kRowWidth = 52 + 2 * 33;
constexpr int kWireWidth = 2 + 12 + 2 + 7;
constexpr int kPredictionWidth = 2 + 12 + 2 + 7 + 2 + 6 + 2 + 6;

// A right-aligned field of exactly `width` characters: leading spaces, then one token.
bool Field(absl::string_view line, size_t at, size_t width, std::string* token) {
  if (line.size() < at + width) return false;
  absl::string_view cell = line.substr(at, width);
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(cell);
  if (trimmed.empty() || absl::StrContains(trimmed, ' ')) return false;
  *token = std::string(trimmed);
  return true;
}

bool Gap(absl::string_view line, size_t at) { return line.substr(at, 2) == "  "; }

// nccl-tests' rule for a number in a column `width` wide, checked on the printed text.
bool FollowsNumberRule(const std::string& text, int width) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) return false;
  int power = 0;
  for (double limit = 1; value >= limit && power <= 20; limit *= 10) ++power;
  const size_t dot = text.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
  const bool exponent = absl::StrContains(text, 'e');
  if (power < width - 2) return !exponent && decimals == 2;
  if (power < width - 1) return !exponent && decimals == 1;
  if (power < width + 1) return !exponent && dot == std::string::npos;
  return exponent;
}

// "N/A" or a number in nccl-tests' rule.
bool NumberOrNa(const std::string& text, int width) {
  return text == "N/A" || FollowsNumberRule(text, width);
}

std::optional<PerfPrediction> ParsePrediction(absl::string_view line, std::string* problem) {
  PerfPrediction p;
  const size_t at = kRowWidth;
  if (!Gap(line, at) || !Field(line, at + 2, 12, &p.algorithm) || !Gap(line, at + 14) ||
      !Field(line, at + 16, 7, &p.predicted_us) || !Gap(line, at + 23) ||
      !Field(line, at + 25, 6, &p.ratio[0]) || !Gap(line, at + 31) ||
      !Field(line, at + 33, 6, &p.ratio[1])) {
    *problem = "-P columns are not '  %12s  %7s  %6s  %6s'";
    return std::nullopt;
  }
  if (!NumberOrNa(p.predicted_us, 7) || !NumberOrNa(p.ratio[0], 6) || !NumberOrNa(p.ratio[1], 6)) {
    *problem = "-P numbers break the %.2f/%.1f/%.0f/exponent rule";
    return std::nullopt;
  }
  return p;
}

std::optional<PerfWire> ParseWire(absl::string_view line, std::string* problem) {
  PerfWire wire;
  std::string bytes;
  const size_t at = kRowWidth;
  if (line.size() != kRowWidth + kWireWidth || !Gap(line, at) || !Field(line, at + 2, 12, &bytes) ||
      !Gap(line, at + 14) || !Field(line, at + 16, 7, &wire.ratio) ||
      !absl::SimpleAtoi(bytes, &wire.bytes)) {
    *problem = "--compression's columns are not '  %12lu  %7s'";
    return std::nullopt;
  }
  const size_t dot = wire.ratio.find('.');
  double ratio = 0;
  if (wire.ratio != "N/A" && (!absl::SimpleAtod(wire.ratio, &ratio) || dot == std::string::npos ||
                              wire.ratio.size() - dot != 5)) {
    *problem = "the ratio is neither %.4f nor N/A";
    return std::nullopt;
  }
  return wire;
}

std::optional<PerfRow> ParseRow(absl::string_view line, bool compressed, std::string* problem) {
  const int width = static_cast<int>(line.size());
  if (compressed && width != kRowWidth + kWireWidth) {
    *problem = absl::StrCat("row is ", line.size(), " characters, not ", kRowWidth + kWireWidth,
                            " (with --compression's columns)");
    return std::nullopt;
  }
  if (!compressed && width != kRowWidth && width < kRowWidth + kPredictionWidth) {
    *problem = absl::StrCat("row is ", line.size(), " characters, not ", kRowWidth, " (or ",
                            kRowWidth + kPredictionWidth, " with -P, more with -V)");
    return std::nullopt;
  }
  PerfRow row;
  std::string size, count, root;
  if (!Field(line, 0, 12, &size) || !Gap(line, 12) || !Field(line, 14, 12, &count) ||
      !Gap(line, 26) || !Field(line, 28, 8, &row.type) || !Gap(line, 36) ||
      !Field(line, 38, 6, &row.redop) || !Gap(line, 44) || !Field(line, 46, 6, &root) ||
      !absl::SimpleAtoi(size, &row.size) || !absl::SimpleAtoi(count, &row.count) ||
      !absl::SimpleAtoi(root, &row.root)) {
    *problem = "size/count/type/redop/root columns are not %12li  %12li  %8s  %6s  %6i";
    return std::nullopt;
  }
  for (int h = 0; h < 2; ++h) {
    const size_t at = 52 + 33 * h;
    std::string time, algbw, busbw, wrong;
    if (!Gap(line, at) || !Field(line, at + 2, 7, &time) || !Gap(line, at + 9) ||
        !Field(line, at + 11, 6, &algbw) || !Gap(line, at + 17) ||
        !Field(line, at + 19, 6, &busbw) || !Gap(line, at + 25) ||
        !Field(line, at + 27, 6, &wrong)) {
      *problem = "a half is not '  %7s  %6s  %6s  %6s'";
      return std::nullopt;
    }
    if (!FollowsNumberRule(time, 7) || !FollowsNumberRule(algbw, 6) ||
        !FollowsNumberRule(busbw, 6)) {
      *problem = "time/algbw/busbw break the %.2f/%.1f/%.0f/exponent rule";
      return std::nullopt;
    }
    PerfHalf& half = row.half[h];
    (void)absl::SimpleAtod(time, &half.time_us);
    (void)absl::SimpleAtod(algbw, &half.algbw);
    (void)absl::SimpleAtod(busbw, &half.busbw);
    if (wrong != "N/A") {
      double value = 0;
      if (!absl::SimpleAtod(wrong, &value) || value < 0 || value != std::floor(value)) {
        *problem = "#wrong is neither a count nor N/A";
        return std::nullopt;
      }
      half.wrong = static_cast<int64_t>(value);
    }
  }
  if (compressed) {
    row.wire = ParseWire(line, problem);
    if (!row.wire) return std::nullopt;
    return row;
  }
  if (width > kRowWidth) {
    row.prediction = ParsePrediction(line, problem);
    if (!row.prediction) return std::nullopt;
  }
  if (width > kRowWidth + kPredictionWidth) {
    const absl::string_view rest = line.substr(kRowWidth + kPredictionWidth);
    if (!Gap(rest, 0) || rest.size() == 2 || absl::StrContains(rest.substr(2), ' ')) {
      *problem = "-V's column is not two spaces and the variant's name";
      return std::nullopt;
    }
    row.variant = std::string(rest.substr(2));
  }
  return row;
}

}  // namespace

PerfOutput ParsePerfOutput(const std::string& text) {
  PerfOutput out;
  enum class Stage {
    kPreamble,
    kTable,
    kFooterBandwidth,
    kFooterHash,
    kConcluded,
    kLastHash,
    kEnd
  };
  Stage stage = Stage::kPreamble;
  int header_lines = 0;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the text ends in '\n'
  for (const std::string& line : lines) {
    const auto problem = [&](absl::string_view what) {
      out.problems.push_back(absl::StrCat(what, ": '", line, "'"));
    };
    if (absl::StartsWith(line, "weftrun:")) {
      out.other.push_back(line);
      continue;
    }
    switch (stage) {
      case Stage::kPreamble:
        if (absl::StartsWith(line, "# Collective test starting: ")) {
          out.program = line.substr(28);
        } else if (absl::StartsWith(line, "#  Rank ")) {
          int rank = 0, group = 0, pid = 0, device = 0, end = 0;
          char host[256], bracket[64];
          if (std::sscanf(line.c_str(), "#  Rank %d Group %d Pid %d on %255s device %d [%63[^]]]%n",
                          &rank, &group, &pid, host, &device, bracket, &end) != 6 ||
              line !=
                  absl::StrCat(absl::StrFormat("#  Rank %2d Group %2d Pid %6d on %10s device %2d [",
                                               rank, group, pid, host, device),
                               bracket, "]", line.substr(end))) {
            problem(
                "device line is not '#  Rank %2d Group %2d Pid %6d on %10s device %2d [..] ..'");
          }
          ++out.device_lines;
          out.device_ranks.push_back(rank);
        } else if (absl::StartsWith(line, "# nThread 1 nGpus 1 minBytes ")) {
          out.parameters_line = true;
        } else if (header_lines < 3 && (line == kResultHeader[header_lines] ||
                                        (header_lines == 1 && line == kResultHeaderCputime) ||
                                        line == kPredictedHeader[header_lines] ||
                                        (header_lines == 1 && line == kVariantsHeader) ||
                                        line == kCompressedHeader[header_lines])) {
          if (header_lines == 0) out.compressed_header = line == kCompressedHeader[0];
          if (out.compressed_header != (line == kCompressedHeader[header_lines])) {
            problem("result header lines mix nccl-tests' and --compression's");
          }
          if (header_lines == 0) out.predicted_header = line == kPredictedHeader[0];
          if (header_lines == 1) out.variants_header = line == kVariantsHeader;
          const bool predicted_line = line == kPredictedHeader[header_lines] || out.variants_header;
          if (out.predicted_header != predicted_line) {
            problem("result header lines mix nccl-tests' and -P's");
          }
          if (++header_lines == 3) {
            out.result_header = true;
            stage = Stage::kTable;
          }
        } else if (header_lines > 0) {
          problem("result header line differs from nccl-tests'");
        } else if (!absl::StartsWith(line, "#")) {
          out.other.push_back(line);
        }
        break;
      case Stage::kTable:
        if (absl::StartsWith(line, "# Out of bounds values : ")) {
          int count = 0;
          char verdict[16] = {};
          if (std::sscanf(line.c_str(), "# Out of bounds values : %d %15s", &count, verdict) != 2 ||
              line !=
                  absl::StrCat("# Out of bounds values : ", count, " ", count ? "FAILED" : "OK")) {
            problem("not '# Out of bounds values : %d OK|FAILED'");
          }
          out.out_of_bounds = count;
          stage = Stage::kFooterBandwidth;
        } else if (absl::StartsWith(line, "#")) {
          out.other.push_back(line);
        } else {
          std::string why;
          std::optional<PerfRow> row = ParseRow(line, out.compressed_header, &why);
          if (row) {
            out.rows.push_back(*row);
          } else {
            problem(why);
          }
        }
        break;
      case Stage::kFooterBandwidth: {
        constexpr absl::string_view kPrefix = "# Avg bus bandwidth    : ";
        double value = 0;
        std::vector<std::string> parts =
            absl::StrSplit(line.substr(std::min(line.size(), kPrefix.size())), ' ');
        if (!absl::StartsWith(line, kPrefix) || parts.size() != 2 ||
            !absl::SimpleAtod(parts[0], &value) ||
            (parts[1] != "" && parts[1] != "OK" && parts[1] != "FAILED")) {
          problem("not '# Avg bus bandwidth    : %g [OK|FAILED]'");
        } else {
          out.average_busbw = value;
          out.bandwidth_verdict = parts[1];
        }
        stage = Stage::kFooterHash;
        break;
      }
      case Stage::kFooterHash:
        if (line != "#") problem("expected '#' after the bandwidth line");
        stage = Stage::kConcluded;
        break;
      case Stage::kConcluded:
        if (line != absl::StrCat("# Collective test concluded: ", out.program)) {
          problem("not '# Collective test concluded: <program>'");
        }
        stage = Stage::kLastHash;
        break;
      case Stage::kLastHash:
        if (line != "#") problem("expected '#' after the conclusion");
        out.concluded = true;
        stage = Stage::kEnd;
        break;
      case Stage::kEnd:
        if (out.ended) {
          out.other.push_back(line);
        } else if (line.empty()) {
          out.ended = true;
        } else if (absl::StartsWith(line, "# error: ")) {
          out.ended = true;
          out.error = line.substr(9);
        } else {
          problem("expected an empty line or '# error: ...' to end the output");
        }
        break;
    }
  }
  // A run that fails before the table may still print "# error:" without a footer.
  if (!out.error) {
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, "# error: ")) out.error = line.substr(9);
    }
  }
  return out;
}

}  // namespace weft::testing
