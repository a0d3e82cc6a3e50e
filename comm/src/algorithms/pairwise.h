// Pairwise-exchange all-to-all: in step s every rank sends its block for rank+s and receives
// the block from rank-s, so each step is a perfect matching and no link carries two messages.
#pragma once

#include "algorithms/algorithm.h"

namespace weft {

class PairwiseAllToAll final : public Algorithm {
 public:
  PairwiseAllToAll(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

}  // namespace weft
