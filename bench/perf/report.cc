#include "perf/report.h"

#include <cstdio>

#include "perf/table.h"

namespace weft::perf {

void Report::BeginRow(int64_t bytes, int64_t count, const char* type, const char* redop, int root) {
  row_ = RowPreamble(bytes, count, type, redop, root);
  prediction_.reset();
  variant_.clear();
  wire_.reset();
  ratios_[0].reset();
  ratios_[1].reset();
}

void Report::AddHalf(const Measurement& half) {
  row_ += RowHalf(half.time_us, half.algbw, half.busbw, half.wrong);
  if (half.prediction.has_value()) {
    if (!prediction_.has_value()) prediction_ = half.prediction;
    ratios_[half.in_place ? 1 : 0] = half.prediction->measured_over_predicted;
  }
  variant_ = half.variant;
  if (!wire_.has_value()) wire_ = half.wire;
  busbw_sum_ += half.busbw;
  ++halves_;
  if (half.wrong.has_value()) wrong_total_ += *half.wrong;
  if (json_ != nullptr) json_->Add(half);
}

void Report::EndRow() {
  if (prediction_.has_value()) {
    row_ +=
        RowPrediction(prediction_->algorithm, prediction_->predicted_us, ratios_[0], ratios_[1]);
  }
  if (!variant_.empty()) row_ += RowVariant(variant_);
  if (wire_.has_value()) row_ += RowWire(wire_->bytes, wire_->uncompressed_bytes);
  if (prints_) std::printf("%s\n", row_.c_str());
  row_.clear();
}

}  // namespace weft::perf
