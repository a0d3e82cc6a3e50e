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
    compact += range.length;
  }
  num_ranges_ = owned.size();
  owned_size_ = compact;
  m_.assign(compact, 0.0f);
  v_.assign(compact, 0.0f);
}

absl::Status AdamW::Offload(offload::TieredStore* store) {
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    if (absl::Status s = store->Add(name, offload::Tier::kDisk, *moments); !s.ok()) return s;
    std::vector<float>().swap(*moments);
  }
  store_ = store;
  return absl::OkStatus();
}

absl::Status AdamW::FetchMoments() {
  if (store_ == nullptr) return absl::OkStatus();
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    moments->resize(owned_size_);
    if (absl::Status s = store_->Read(name, absl::MakeSpan(*moments)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AdamW::StoreMoments() {
  if (store_ == nullptr) return absl::OkStatus();
  for (auto [name, moments] : {std::pair{"adam_m", &m_}, std::pair{"adam_v", &v_}}) {
    if (absl::Status s = store_->Write(name, *moments); !s.ok()) return s;
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
  // Segment s's elements [first, first + count) of the moments, which are at m and v.
  const auto update = [&](const Segment& s, size_t first, size_t count, float* m, float* v) {
    const size_t at = s.offset + (first - s.compact);
    weft::AdamW(s.decay ? with_decay : without_decay, params[s.range] + at, grads[s.range] + at, m,
                v, count);
  };
  if (store_ == nullptr) {
    for (const Segment& s : segments_) {
      update(s, s.compact, s.count, m_.data() + s.compact, v_.data() + s.compact);
    }
    return absl::OkStatus();
  }
  // Segments are in the order of their moments; a tile covers parts of some of them.
  size_t next = 0;
  offload::TileStream stream(store_, {{"adam_m", offload::StreamAccess::kReadWrite},
                                      {"adam_v", offload::StreamAccess::kReadWrite}});
  return stream.Run([&](const offload::StreamTile& tile) {
    const size_t begin = tile.offset, end = tile.offset + tile.count;
    while (next < segments_.size() && segments_[next].compact + segments_[next].count <= begin) {
      ++next;
    }
    for (size_t k = next; k < segments_.size() && segments_[k].compact < end; ++k) {
      const Segment& s = segments_[k];
      const size_t first = std::max(begin, s.compact);
      const size_t last = std::min(end, s.compact + s.count);
      update(s, first, last - first, tile.data[0] + (first - begin),
             tile.data[1] + (first - begin));
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
