// Binomial-tree broadcast and reduce, pipelined in chunks.
//
// Ranks are numbered relative to the root; relative rank v receives from v with its lowest set
// bit cleared and serves v + 2^k for every 2^k below that bit. The tree has depth ceil(log2 p), so
// small messages need few steps; cutting large messages into chunks lets every level of the tree
// work at once, so large messages cost about one transfer time plus the depth in chunks.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"

namespace weft {

// The binomial tree of `size` ranks rooted at `root`, from the point of view of `rank`.
struct BinomialTree {
  BinomialTree(int rank, int size, int root);

  int parent = -1;            // real rank; -1 at the root
  std::vector<int> children;  // real ranks, largest subtree first
};

class TreeBroadcast final : public Algorithm {
 public:
  TreeBroadcast(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const BinomialTree tree_;
};

class TreeReduce final : public Algorithm {
 public:
  TreeReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const BinomialTree tree_;
};

}  // namespace weft
