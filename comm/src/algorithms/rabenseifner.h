// Rabenseifner's algorithms (Gloo's "halving-doubling"): recursive halving for reduce-scatter,
// recursive doubling for all-gather, and the two in a row for all-reduce.
//
// Each moves the same bytes as the ring, (p-1)/p of the data per half, in log2(p) steps per half
// instead of p-1, so they win whenever latency matters (small and medium messages, many ranks).
// In step k a rank exchanges with the rank whose number differs in bit k; across nodes numbered
// node by node, the all-gather's first steps and the reduce-scatter's last stay inside a node. A
// rank count that is not a power of two folds its extra ranks first (power_of_two_fold.h); the
// reduce-scatter and all-gather then run over per-rank blocks grouped by participant, each
// participant's blocks contiguous.
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

class RabenseifnerReduceScatter final : public Algorithm {
 public:
  RabenseifnerReduceScatter(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const PowerOfTwoFold fold_;
};

class RabenseifnerAllGather final : public Algorithm {
 public:
  RabenseifnerAllGather(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const PowerOfTwoFold fold_;
};

}  // namespace weft
