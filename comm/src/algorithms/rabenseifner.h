// Rabenseifner's all-reduce: recursive-halving reduce-scatter, then recursive-doubling
// all-gather.
//
// Moves the same bytes as the ring, 2(p-1)/p of the data, but in 2 log2(p) steps instead of
// 2(p-1), so it wins whenever latency matters (medium messages, many ranks). A rank count that is
// not a power of two folds its extra ranks first (power_of_two_fold.h).
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/power_of_two_fold.h"

namespace weft {

class RabenseifnerAllReduce final : public Algorithm {
 public:
  RabenseifnerAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const PowerOfTwoFold fold_;
};

}  // namespace weft
