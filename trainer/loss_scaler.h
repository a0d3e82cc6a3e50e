// LossScaler: fp16's dynamic loss scaling.
//
// fp16 holds magnitudes from 6e-8 to 65504 only, so small activation gradients would flush to
// zero: backward therefore runs on the loss times scale(), and the optimizer divides the
// gradients by it again. After each step's overflow check (an infinity or NaN in any rank's
// gradients, agreed by one all-reduce), Update says what to do: on overflow the step is skipped
// (no parameter or moment changes) and the scale halves; after `window` clean steps in a row it
// doubles. The scale is a power of two times the initial one, so scaling and unscaling are exact.
// Its state travels in checkpoints, so a resumed run scales exactly as an uninterrupted one.
#pragma once

#include <cstdint>

namespace weft::trainer {

class LossScaler {
 public:
  struct State {
    double scale = 1;
    int64_t clean_steps = 0;  // since the last change
    int64_t skipped = 0;      // steps skipped so far
  };

  LossScaler(double initial_scale, int window) : window_(window) { state_.scale = initial_scale; }

  double scale() const { return state_.scale; }
  // After a step's check: true when the step must be skipped (overflow found).
  bool Update(bool overflow);

  const State& state() const { return state_; }
  void Restore(const State& state) { state_ = state; }

 private:
  int window_;
  State state_;
};

}  // namespace weft::trainer
