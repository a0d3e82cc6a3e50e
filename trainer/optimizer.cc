#include "optimizer.h"

#include <algorithm>
#include <cmath>

#include "weft/kernels/adam.h"
#include "weft/offload/tile_stream.h"

namespace weft::trainer {

AdamW::AdamW(const ParamLayout& layout, const AdamWSettings& settings,
             std::vector<shard::Range> owned)
    : settings_(settings) {
  if (owned.empty()) owned.push_back({0, layout.total()});
  size_t compact = 0;
  for (size_t r = 0; r < owned.size(); ++r) {
    const shard::Range& range = owned[r];
    const size_t end = range.begin + range.length;
    for (const TensorView& t : layout.tensors()) {
      const size_t first = std::max(range.begin, t.offset);
      const size_t last = std::min(end, t.offset + t.size);
      if (first >= last) continue;
      const size_t offset = first - range.begin;
      segments_.push_back({r, offset, compact + offset, last - first, t.weight_decay});
    }
    range_size_.push_back(range.length);
    range_compact_.push_back(compact);
    compact += range.length;
  }
  num_ranges_ = owned.size();
  owned_size_ = compact;
  m_.assign(compact, 0.0f);
  v_.assign(compact, 0.0f);
}

std::string AdamW::MomentArray(const char* moment, size_t range) {
  return std::string(moment) + "." + std::to_string(range);
}

std::string AdamW::ParamArray(size_t range) { return "params." + std::to_string(range); }

absl::Status AdamW::Offload(offload::TieredStore* store, bool params) {
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    for (size_t r = 0; r < num_ranges_; ++r) {
      if (absl::Status s =
              store->Add(MomentArray(name, r), offload::Tier::kDisk,
                         absl::MakeConstSpan(moments->data() + range_compact_[r], range_size_[r]));
          !s.ok()) {
        return s;
      }
    }
    std::vector<float>().swap(*moments);
  }
  store_ = store;
  offload_params_ = params;
  return absl::OkStatus();
}

absl::Status AdamW::FetchMoments() {
  if (store_ == nullptr) return absl::OkStatus();
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    moments->resize(owned_size_);
    for (size_t r = 0; r < num_ranges_; ++r) {
      if (absl::Status s =
              store_->Read(MomentArray(name, r),
                           absl::MakeSpan(moments->data() + range_compact_[r], range_size_[r]));
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AdamW::StoreMoments() {
  if (store_ == nullptr) return absl::OkStatus();
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    for (size_t r = 0; r < num_ranges_; ++r) {
      if (absl::Status s = store_->Write(
              MomentArray(name, r),
              absl::MakeConstSpan(moments->data() + range_compact_[r], range_size_[r]));
          !s.ok()) {
        return s;
      }
    }
    std::vector<float>().swap(*moments);
  }
  return absl::OkStatus();
}

absl::Status AdamW::Step(const std::vector<float*>& params, const std::vector<const float*>& grads,
                         double lr) {
  ++step_;
  // The fused SIMD update (weft/kernels/adam.h), with and without decoupled weight decay.
  const AdamWStep with_decay = MakeAdamWStep(settings_.beta1, settings_.beta2, settings_.eps, lr,
                                             settings_.weight_decay, step_);
  const AdamWStep without_decay =
      MakeAdamWStep(settings_.beta1, settings_.beta2, settings_.eps, lr, 0.0, step_);
  if (store_ != nullptr) {
    for (size_t r = 0; r < num_ranges_; ++r) {
      if (absl::Status s = StepRange(r, with_decay, without_decay, params, grads); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  for (const Segment& s : segments_) {
    weft::AdamW(s.decay ? with_decay : without_decay, params[s.range] + s.offset,
                grads[s.range] + s.offset, m_.data() + s.compact, v_.data() + s.compact, s.count);
  }
  return absl::OkStatus();
}

absl::Status AdamW::StepRange(size_t r, const AdamWStep& with_decay, const AdamWStep& without_decay,
                              const std::vector<float*>& params,
                              const std::vector<const float*>& grads) {
  // The range's segments, in the order of their elements; a tile covers parts of some of them.
  size_t next = 0;
  while (next < segments_.size() && segments_[next].range < r) ++next;
  size_t end_segment = next;
  while (end_segment < segments_.size() && segments_[end_segment].range == r) ++end_segment;
  std::vector<offload::StreamArray> arrays = {
      {MomentArray("adam_m", r), offload::StreamAccess::kReadWrite},
      {MomentArray("adam_v", r), offload::StreamAccess::kReadWrite}};
  if (offload_params_) arrays.push_back({ParamArray(r), offload::StreamAccess::kReadWrite});
  offload::TileStream stream(store_, std::move(arrays));
  return stream.Run([&](const offload::StreamTile& tile) {
    const size_t begin = tile.offset, end = tile.offset + tile.count;
    while (next < end_segment && segments_[next].offset + segments_[next].count <= begin) ++next;
    for (size_t k = next; k < end_segment && segments_[k].offset < end; ++k) {
      const Segment& s = segments_[k];
      const size_t first = std::max(begin, s.offset);
      const size_t last = std::min(end, s.offset + s.count);
      float* p = offload_params_ ? tile.data[2] + (first - begin) : params[r] + first;
      weft::AdamW(s.decay ? with_decay : without_decay, p, grads[r] + first,
                  tile.data[0] + (first - begin), tile.data[1] + (first - begin), last - first);
    }
    return absl::OkStatus();
  });
}

double SumOfSquares(const float* grads, size_t n) {
  // Eight partial sums: vectorizes, and the order is fixed so the result is reproducible.
  double partial[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      partial[k] += static_cast<double>(grads[i + k]) * grads[i + k];
    }
  }
  double sum = 0.0;
  for (; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  for (double p : partial) sum += p;
  return sum;
}

double GlobalNorm(const float* grads, size_t n) { return std::sqrt(SumOfSquares(grads, n)); }

void ClipToNorm(float* grads, size_t n, double norm, double max_norm) {
  if (max_norm > 0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; ++i) grads[i] *= scale;
  }
}

double LearningRate(int64_t step, int64_t total, int64_t warmup, double lr, double min_ratio) {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double min_lr = lr * min_ratio;
  if (total <= warmup) return min_lr;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace weft::trainer
