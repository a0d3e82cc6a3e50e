// The text nccl-tests 2.19 prints, character for character: the result header, the rows and the
// footer. Pure functions, so the format is testable without running a benchmark.
//
//   #                                                              out-of-place    ...
//   #       size         count      type   redop    root     time   algbw   busbw  #wrong ...
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)         ...
//       33554432       8388608     float     sum      -1   195.40  171.72  300.51       0 ...
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 39.7695
//
// With -P (Weft's own) each header line and row goes on with four columns: the algorithm that
// ran, the tuner's predicted time for it, and measured/predicted for each half; with -V, one
// more: the variant the row measured. With --compression, two columns instead: the bytes a rank
// sent per operation and their ratio to an uncompressed ring's. Everything left of them stays as
// nccl-tests prints it, so scripts that cut columns by position keep working.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft::perf {

// nccl-tests' number rule for a column `width` wide: "%.2f" while the integer part leaves room,
// then "%.1f", then "%.0f", then an exponent ("%.1e" from width 7, else "%.0e"); right-aligned.
std::string FormatNumber(double value, int width);

// The "#" line and the three column-header lines, each ending in '\n'. With `cputime` (-C) the
// time columns are labelled "cputime"; with `predicted` (-P) the -P columns follow, and with
// `variants` (-V, which implies -P) the variant's column after them; with `compressed`
// (--compression) the wire columns.
std::string ResultHeader(bool cputime, bool predicted = false, bool variants = false,
                         bool compressed = false);

// "%12li  %12li  %8s  %6s  %6i": size, count, type, redop, root.
std::string RowPreamble(int64_t bytes, int64_t count, const char* type, const char* redop,
                        int root);

// One half (out-of-place or in-place): "  %7s  %6s  %6s  %6g"; #wrong is "N/A" when unchecked.
std::string RowHalf(double time_us, double algbw, double busbw, std::optional<int64_t> wrong);

// -P's columns: "  %12s  %7s  %6s  %6s" (algorithm, predicted time in us, measured/predicted
// out-of-place and in-place); N/A for what is unknown.
std::string RowPrediction(const std::string& algorithm, std::optional<double> predicted_us,
                          std::optional<double> out_of_place_ratio,
                          std::optional<double> in_place_ratio);

// -V's column, the last: two spaces and the variant's name.
std::string RowVariant(const std::string& variant);

// --compression's columns: "  %12lu  %7.4f" (wire bytes per operation, wire / uncompressed
// bytes); the ratio is N/A when the uncompressed collective sends nothing (1 rank, 0 bytes).
std::string RowWire(uint64_t wire_bytes, uint64_t uncompressed_bytes);

// From "# Out of bounds values" to the last "#" line. `min_bw` is NCCL_TESTS_MIN_BW when set:
// then the bandwidth line ends in OK or FAILED.
std::string Footer(int out_of_bounds, double average_busbw, std::optional<double> min_bw,
                   const std::string& program);

// Whether the average passes NCCL_TESTS_MIN_BW (at least 0.9 x the minimum).
bool BandwidthOk(double average_busbw, double min_bw);

}  // namespace weft::perf
