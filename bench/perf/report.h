// Rank 0's output sink: the table rows on stdout, the JSON records, and the totals the footer
// needs (out-of-bounds count, mean bus bandwidth). On other ranks it only keeps the totals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "perf/json_report.h"
#include "perf/measurement.h"

namespace weft::perf {

class Report {
 public:
  // `json` may be null; it must outlive the Report.
  Report(bool prints, JsonReport* json) : prints_(prints), json_(json) {}

  // A row is printed whole once both halves are in, so output never holds a partial line. Halves
  // that carry a Prediction (-P) add its columns after both halves, a variant (-V) its name, and
  // wire bytes (--compression) theirs.
  void BeginRow(int64_t bytes, int64_t count, const char* type, const char* redop, int root);
  void AddHalf(const Measurement& half);
  void EndRow();

  // A check in which some rank found wrong values (nccl-tests' "Out of bounds values").
  void CountFailedChecks(int failures) { out_of_bounds_ += failures; }

  int out_of_bounds() const { return out_of_bounds_; }
  // Mean of every busbw value in the table (both halves, every row); 0 before any.
  double average_busbw() const { return halves_ > 0 ? busbw_sum_ / halves_ : 0; }
  int64_t wrong_total() const { return wrong_total_; }

 private:
  const bool prints_;
  JsonReport* const json_;
  std::string row_;
  std::optional<Prediction> prediction_;  // the row's, from its first half
  std::string variant_;                   // the row's, from its first half (-V)
  std::optional<WireBytes> wire_;         // the row's, from its first half (--compression)
  std::optional<double> ratios_[2];       // measured/predicted: out-of-place, in-place
  int out_of_bounds_ = 0;
  double busbw_sum_ = 0;
  int halves_ = 0;
  int64_t wrong_total_ = 0;
};

}  // namespace weft::perf
