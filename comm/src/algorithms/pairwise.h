// Pairwise-exchange all-to-all: in step s every rank sends its block for rank+s and receives
// the block from rank-s, so each step is a perfect matching and no link carries two messages.
// The blocks are equal (all_to_all) or the caller's (all_to_all_v); each travels as one message,
// so a pair of ranks that disagrees on its size fails the receive.
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/ring.h"

namespace weft {

class PairwiseAllToAll final : public Algorithm {
 public:
  PairwiseAllToAll(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const Segments send_blocks_;
  const Segments recv_blocks_;
};

}  // namespace weft
