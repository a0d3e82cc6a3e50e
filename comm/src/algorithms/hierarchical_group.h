// How the hierarchical algorithms cut a communicator into sub-groups (one node's ranks, or one lane
// across nodes) and their buffers into per-lane blocks and pipeline chunks; the sub-groups run the
// ring steps of ring.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/algorithm.h"
#include "algorithms/ring.h"
#include "node_layout.h"
#include "peers.h"

namespace weft {

// How reduce-scatter and all-gather group per-rank blocks by lane: rank d's block belongs to lane
// (local rank of d) % lanes(), and each lane keeps its blocks packed node by node, so the part of
// a lane that belongs to one node is one contiguous segment for the ring across nodes.
struct LaneBlocks {
  explicit LaneBlocks(const NodeLayout& nodes);

  int lane_of(int rank) const { return lane_of_rank[rank]; }

  std::vector<int> lane_of_rank;
  std::vector<int> index_of_rank;            // position of a rank's block within its lane
  std::vector<std::vector<int>> ranks;       // per lane: ranks in packed order
  std::vector<size_t> first_block;           // per lane: blocks packed before it
  std::vector<std::vector<int>> node_start;  // per lane: first position of each node, and end
};

// One block of `block` bytes per rank in `work`, packed as LaneBlocks orders them, so that each
// lane's blocks, and each node's part of a lane, travel as single messages.
struct PackedBlocks {
  PackedBlocks(const NodeLayout& nodes, std::byte* work, size_t block)
      : plan(nodes), work(work), block(block) {}

  std::byte* lane_at(int lane) const { return work + plan.first_block[lane] * block; }
  size_t lane_bytes(int lane) const { return plan.ranks[lane].size() * block; }
  std::byte* block_at(int rank) const {
    return lane_at(plan.lane_of(rank)) + plan.index_of_rank[rank] * block;
  }
  // Each node's part of lane `lane`, relative to lane_at(lane): the segments of the lane's ring
  // across nodes.
  Segments NodeSegments(int lane) const;

  LaneBlocks plan;
  std::byte* work;
  size_t block;
};

// Whether every rank has a lane (nodes of equal size): a lane then holds one block per node, and
// reduce-scatter and all-gather move each block from or to where the caller's buffers hold it
// instead of packing the blocks by lane (one message per block inside the node, not per lane).
inline bool EveryRankHasALane(const NodeLayout& nodes) {
  return nodes.max_local_size() == nodes.lanes();
}

// This rank's lane: its local rank, or -1 where that is >= lanes() (such a rank hands its data to
// a lane rank of its node and gets the result back from one).
inline int OwnLane(const NodeLayout& nodes) {
  return nodes.local_rank() < nodes.lanes() ? nodes.local_rank() : -1;
}

// A buffer of `count` elements cut into pipeline chunks, each split evenly over the lanes, for the
// all-reduce and the broadcast: while a lane rank carries its piece of one chunk across nodes,
// the next chunk already moves inside the node. Chunks are large enough that per-message costs
// stay small, and small enough that a 64 MiB buffer makes tens of them.
class LaneChunks {
 public:
  struct Piece {
    std::byte* at;
    size_t bytes;
  };

  LaneChunks(std::byte* data, size_t count, size_t element_bytes, int lanes);

  size_t chunks() const { return chunks_; }
  // Lane `lane`'s piece of chunk `chunk`.
  Piece piece(size_t chunk, int lane) const;

 private:
  std::byte* data_;
  size_t count_;
  size_t element_bytes_;
  int lanes_;
  size_t chunk_;  // elements
  size_t chunks_;
};

// The step number of sub-step `sub` of `phase` (< 4) for pipeline chunk `chunk`: unique within an
// operation while sub < 1024, so every message of a pipelined schedule carries its own step.
constexpr uint32_t PipelineStep(size_t chunk, int phase, int sub = 0) {
  return static_cast<uint32_t>(chunk) * 4096 + static_cast<uint32_t>(phase) * 1024 +
         static_cast<uint32_t>(sub);
}

}  // namespace weft
