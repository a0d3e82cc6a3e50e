#include "optimizer.h"

#include <algorithm>
#include <cmath>

#include "vector_clones.h"

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
  m_.assign(compact, 0.0f);
  v_.assign(compact, 0.0f);
}

// Compiled for AVX-512, AVX2 and baseline; the same IEEE operations per element in each.
WEFT_VECTOR_CLONES void AdamW::Step(const std::vector<float*>& params,
                                    const std::vector<const float*>& grads, double lr) {
  ++step_;
  const float b1 = static_cast<float>(settings_.beta1);
  const float b2 = static_cast<float>(settings_.beta2);
  const float eps = static_cast<float>(settings_.eps);
  const float correction1 = static_cast<float>(1.0 / (1.0 - std::pow(settings_.beta1, step_)));
  const float correction2 = static_cast<float>(1.0 / (1.0 - std::pow(settings_.beta2, step_)));
  const float rate = static_cast<float>(lr);
  float* m = m_.data();
  float* v = v_.data();
  for (const Segment& s : segments_) {
    const float decay = s.decay ? static_cast<float>(lr * settings_.weight_decay) : 0.0f;
    float* p = params[s.range] + s.offset;
    const float* g = grads[s.range] + s.offset;
    float* ms = m + s.compact;
    float* vs = v + s.compact;
    for (size_t i = 0; i < s.count; ++i) {
      ms[i] = b1 * ms[i] + (1.0f - b1) * g[i];
      vs[i] = b2 * vs[i] + (1.0f - b2) * g[i] * g[i];
      const float m_hat = ms[i] * correction1;
      const float v_hat = vs[i] * correction2;
      p[i] -= rate * m_hat / (std::sqrt(v_hat) + eps) + decay * p[i];
    }
  }
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
