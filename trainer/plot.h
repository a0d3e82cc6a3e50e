// The loss-curve plot: a PNG drawn by gnuplot from the run's losses.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::trainer {

// Writes DIR/loss.dat and DIR/loss.gp and runs gnuplot to draw DIR/loss.png (train loss per step,
// validation loss at its steps). Returns the PNG's path; an error says why there is none (e.g.
// gnuplot missing: install gnuplot-nox).
absl::StatusOr<std::string> PlotLoss(const std::string& dir,
                                     const std::vector<std::pair<int, double>>& train,
                                     const std::vector<std::pair<int, double>>& val);

}  // namespace weft::trainer
