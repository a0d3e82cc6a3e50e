// Dissemination barrier: in round k every rank signals rank+2^k and waits for rank-2^k, so after
// ceil(log2 p) rounds every rank has heard, directly or not, from every other.
#pragma once

#include "algorithms/algorithm.h"

namespace weft {

class DisseminationBarrier final : public Algorithm {
 public:
  explicit DisseminationBarrier(Peers& peers) : peers_(peers) {}
  absl::Status Run() override;

 private:
  Peers& peers_;
};

}  // namespace weft
