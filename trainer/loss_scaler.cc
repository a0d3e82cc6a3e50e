#include "loss_scaler.h"

#include <algorithm>

namespace weft::trainer {

bool LossScaler::Update(bool overflow) {
  if (overflow) {
    // Not below 1: a scale under 1 would only lose the small gradients scaling exists to keep.
    state_.scale = std::max(1.0, state_.scale / 2);
    state_.clean_steps = 0;
    ++state_.skipped;
    return true;
  }
  if (++state_.clean_steps >= window_) {
    state_.scale *= 2;
    state_.clean_steps = 0;
  }
  return false;
}

}  // namespace weft::trainer
