// Rabenseifner's algorithms (Gloo's "halving-doubling"): recursive halving for reduce-scatter,
// recursive doubling for all-gather, and the two in a row for all-reduce.
//
// Each moves the same bytes as the ring, (p-1)/p of the data per half, in log2(p) steps per half
// instead of p-1, so they win whenever latency matters (small and medium messages, many ranks).
// In each step a rank exchanges with the rank whose number differs in one bit. Over several nodes
// the halving takes the low bits first, so that over ranks numbered node by node its large first
// steps stay inside a node and only its smallest crosses the network, and the doubling retraces
// it; the reduce-scatter and the all-gather do so on a copy whose blocks are in bit-reversed
// order, where rank v's part of the halving is block v. A rank count that is not a power of two
// folds its extra ranks first (power_of_two_fold.h); the reduce-scatter and all-gather then run
// over per-rank blocks grouped by participant, each participant's blocks contiguous.
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
