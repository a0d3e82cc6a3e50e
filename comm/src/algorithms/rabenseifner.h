// Rabenseifner's all-reduce: recursive-halving reduce-scatter, then recursive-doubling
// all-gather.
//
// Moves the same bytes as the ring, 2(p-1)/p of the data, but in 2 log2(p) steps instead of
// 2(p-1), so it wins whenever latency matters (small and medium messages, many ranks). For a
// rank count that is not a power of two, the first 2r ranks (r = p - 2^k) pair up first: even
// ranks hand their data to their odd neighbour and sit out, and get the result back at the end.
#pragma once

#include "algorithms/algorithm.h"

namespace weft {

class RabenseifnerAllReduce final : public Algorithm {
 public:
  RabenseifnerAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  // The real rank of participant `virtual_rank` among the 2^k that run the halving phase.
  int RealRank(int virtual_rank) const;

  Peers& peers_;
  const CollectiveArgs args_;
  int power_ = 1;   // largest power of two <= p
  int folded_ = 0;  // p - power_: ranks that hand their data to a neighbour
  int virtual_rank_ = -1;
};

}  // namespace weft
