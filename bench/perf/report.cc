#include "perf/report.h"

#include <cstdio>

#include "perf/table.h"

namespace weft::perf {

void Report::BeginRow(int64_t bytes, int64_t count, const char* type, const char* redop, int root) {
  row_ = RowPreamble(bytes, count, type, redop, root);
}

void Report::AddHalf(const Measurement& half) {
  row_ += RowHalf(half.time_us, half.algbw, half.busbw, half.wrong);
  busbw_sum_ += half.busbw;
  ++halves_;
  if (half.wrong.has_value()) wrong_total_ += *half.wrong;
  if (json_ != nullptr) json_->Add(half);
}

void Report::EndRow() {
  if (prints_) std::printf("%s\n", row_.c_str());
  row_.clear();
}

}  // namespace weft::perf
