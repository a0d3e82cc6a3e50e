// AdamW over the flat parameter buffer, global-norm clipping and the learning-rate schedule.
//
// An AdamW updates the flat ranges of the layout it owns (all of it, or a ZeRO rank's slices),
// each wherever the caller keeps it, and keeps moments for those ranges only, back to back. Weight
// decay is decoupled (θ -= lr · wd · θ, not added to the gradient) and applies only to tensors the
// layout marks (matrices and embeddings), also where a range boundary cuts a tensor; padding
// between units is not touched.
//
// Offloaded (Offload), the moments live in disk arrays of an offload::TieredStore instead, one
// pair per owned range, and Step streams them tile by tile (offload/tile_stream.h: the next tiles
// read and the previous one written back while the update runs on this one), with the range's
// parameters too when those are offloaded; each element gets the same fused update, so the
// results are bit-identical to everything in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "param_layout.h"
#include "weft/kernels/adam.h"
#include "weft/offload/tiered_store.h"
#include "weft/shard/shard_layout.h"

namespace weft::trainer {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // `owned`: the flat ranges to update, in order (empty: the whole layout).
  AdamW(const ParamLayout& layout, const AdamWSettings& settings,
        std::vector<shard::Range> owned = {});

  // One update with learning rate `lr` (the step count advances by one). params[i] and grads[i]
  // point at owned range i (num_ranges() of each; for the whole layout: the flat buffers).
  // Errors: the offloaded moments' I/O (a torn tile, a failed read or write).
  absl::Status Step(const std::vector<float*>& params, const std::vector<const float*>& grads,
                    double lr);
  // Owned ranges: the pointers Step takes of each.
  size_t num_ranges() const { return num_ranges_; }
  // Elements of the owned ranges: the size of m() and v().
  size_t owned_size() const { return owned_size_; }
  // Elements of each owned range.
  const std::vector<size_t>& range_sizes() const { return range_size_; }

  int64_t step() const { return step_; }
  // The moments, in memory (offloaded: between FetchMoments and StoreMoments only).
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }

  // Moves the moments into disk arrays of `store` (which must outlive the optimizer), named
  // MomentArray("adam_m" or "adam_v", range), and frees them here. With `params`, Step also
  // streams each range's parameters from array ParamArray(range), which the caller fills, and
  // ignores the parameter pointers it is given.
  absl::Status Offload(offload::TieredStore* store, bool params = false);
  static std::string MomentArray(const char* moment, size_t range);
  static std::string ParamArray(size_t range);
  bool offloaded() const { return store_ != nullptr; }
  // Offloaded: reads the moments back into m() and v() (for a checkpoint to read or fill), and
  // writes them to the store again, freeing them. Nothing in memory.
  absl::Status FetchMoments();
  absl::Status StoreMoments();
  // For a checkpoint restore: moments are restored through m() and v().
  void set_step(int64_t step) { step_ = step; }

 private:
  // A run of one tensor's elements inside one owned range.
  struct Segment {
    size_t range = 0;    // which owned range
    size_t offset = 0;   // first element in that range's params and grads
    size_t compact = 0;  // first element in the moments
    size_t count = 0;
    bool decay = false;
  };

  AdamWSettings settings_;
  std::vector<Segment> segments_;
  size_t num_ranges_ = 0;
  std::vector<float> m_, v_;
  size_t owned_size_ = 0;
  std::vector<size_t> range_size_, range_compact_;  // per owned range: length, first moment
  int64_t step_ = 0;
  offload::TieredStore* store_ = nullptr;
  bool offload_params_ = false;
  // Streams owned range r's offloaded arrays through one update.
  absl::Status StepRange(size_t r, const AdamWStep& with_decay, const AdamWStep& without_decay,
                         const std::vector<float*>& params, const std::vector<const float*>& grads);
};

// The sum of squares of `n` gradients, accumulated in double in a fixed order.
double SumOfSquares(const float* grads, size_t n);
// The L2 norm of all gradients.
double GlobalNorm(const float* grads, size_t n);
// Scales grads so that a global norm of `norm` becomes at most max_norm (0: leaves them).
void ClipToNorm(float* grads, size_t n, double norm, double max_norm);

// Linear warm-up from lr/warmup to lr over `warmup` steps, then cosine decay to lr · min_ratio at
// step `total`. `step` counts from 0.
double LearningRate(int64_t step, int64_t total, int64_t warmup, double lr, double min_ratio);

}  // namespace weft::trainer
