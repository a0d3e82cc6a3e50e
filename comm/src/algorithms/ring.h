// Ring algorithms: every rank sends to rank+1 and receives from rank-1, p-1 steps per phase.
//
// Bandwidth-optimal on any topology whose links are equally fast: each rank sends and receives
// (p-1)/p of the data per phase. Latency grows linearly with p, which is why small messages go
// to Rabenseifner or the shared-memory direct algorithms instead.
#pragma once

#include "algorithms/algorithm.h"

namespace weft {

// Reduce-scatter then all-gather over p segments of the result buffer.
class RingAllReduce final : public Algorithm {
 public:
  RingAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const Partition segments_;
};

class RingReduceScatter final : public Algorithm {
 public:
  RingReduceScatter(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

class RingAllGather final : public Algorithm {
 public:
  RingAllGather(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

}  // namespace weft
