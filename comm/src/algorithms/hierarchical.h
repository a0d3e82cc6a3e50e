// Hierarchical (two-level) collectives for ranks spread over several nodes.
//
// The network between nodes is far slower than shared memory inside one, so these algorithms
// move data inside the node first and send across nodes only what must cross, with every lane
// (local rank j of each node, see NodeLayout) using the network at the same time: no leader
// carries a node's traffic alone.
//
// All-reduce, per pipeline chunk of the buffer (split into lanes() pieces):
//   1. inside the node, every rank sends piece j to the node's lane-j rank, which reduces them
//      on receipt (a direct reduce-scatter over shared-memory links);
//   2. the lane-j ranks of all nodes all-reduce piece j with a ring across nodes;
//   3. each lane rank sends its finished piece to the other ranks of its node.
// Chunk c+1's first phase is posted before chunk c's ring starts, and chunk c's third phase
// drains while chunk c+1's ring runs, so the phases overlap.
//
// Reduce-scatter and all-gather group the destination blocks by lane: rank d's block belongs to
// lane (local rank of d) % lanes(). Reduce-scatter reduces each lane's blocks inside the node at
// the lane rank, reduce-scatters them across nodes (each lane rank keeping its node's blocks) and
// hands the blocks of ranks without a lane to them; all-gather runs the same path backwards.
// Where every rank has a lane, the blocks stay where the caller's buffers hold them (the all-gather
// copies nothing, the reduce-scatter only its lane's share of the input) instead of being packed.
// Broadcast scatters the root's buffer to its node's lane ranks, sends each piece down a binomial
// tree of its lane across nodes, and lets every lane rank pass its piece to its node, chunk by
// chunk.
//
// Uneven nodes (3 + 1 ranks) have lanes() = the smallest node's size: the larger node's extra
// ranks contribute and receive through a lane rank of their node, and the cross-node exchange
// stays among ranks that hold the same pieces.
#pragma once

#include "algorithms/algorithm.h"

namespace weft {

class HierarchicalAllReduce final : public Algorithm {
 public:
  HierarchicalAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

class HierarchicalReduceScatter final : public Algorithm {
 public:
  HierarchicalReduceScatter(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  absl::Status RunByRank();  // every rank has a lane

  Peers& peers_;
  const CollectiveArgs args_;
};

class HierarchicalAllGather final : public Algorithm {
 public:
  HierarchicalAllGather(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  absl::Status RunByRank();  // every rank has a lane

  Peers& peers_;
  const CollectiveArgs args_;
};

class HierarchicalBroadcast final : public Algorithm {
 public:
  HierarchicalBroadcast(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

}  // namespace weft
