// AdamW over the flat parameter buffer, global-norm clipping and the learning-rate schedule.
//
// Moments live in flat buffers with the parameters' layout (so ZeRO can shard them by range).
// Weight decay is decoupled (θ -= lr · wd · θ, not added to the gradient) and applies only to
// tensors the layout marks (matrices and embeddings).
#pragma once

#include <cstdint>
#include <vector>

#include "param_layout.h"

namespace weft::trainer {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWSettings& settings);

  // One update with learning rate `lr` (the step count advances by one).
  void Step(float* params, const float* grads, double lr);

  int64_t step() const { return step_; }
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  // For a checkpoint restore: moments are restored through m() and v().
  void set_step(int64_t step) { step_ = step; }

 private:
  const ParamLayout& layout_;
  AdamWSettings settings_;
  std::vector<float> m_, v_;
  int64_t step_ = 0;
};

// The L2 norm of all gradients (accumulated in double).
double GlobalNorm(const float* grads, size_t n);
// Scales grads so their global norm is at most max_norm; returns the norm before clipping.
// max_norm = 0 only measures.
double ClipByGlobalNorm(float* grads, size_t n, double max_norm);

// Linear warm-up from lr/warmup to lr over `warmup` steps, then cosine decay to lr · min_ratio at
// step `total`. `step` counts from 0.
double LearningRate(int64_t step, int64_t total, int64_t warmup, double lr, double min_ratio);

}  // namespace weft::trainer
