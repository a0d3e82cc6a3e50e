#include <cstring>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/hierarchical_group.h"

namespace weft {
namespace {

enum Phase { kReduceInNode = 0, kReduceScatterAcross = 1, kHandOut = 2 };

}  // namespace

HierarchicalReduceScatter::HierarchicalReduceScatter(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status HierarchicalReduceScatter::Run() {
  const NodeLayout& nodes = peers_.nodes();
  const int p = peers_.size(), me = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  if (p == 1) {
    if (args_.send != args_.recv) std::memcpy(args_.recv, send, block);
    return absl::OkStatus();
  }
  if (EveryRankHasALane(nodes)) return RunByRank();
  const int lanes = nodes.lanes();
  const std::vector<int>& local = nodes.local_group();
  const int my_lane = OwnLane(nodes);
  // Blocks packed by lane: the caller's send buffer is read-only and its layout is by rank.
  const PackedBlocks packed(nodes, peers_.Scratch(block * p), block);
  const LaneBlocks& plan = packed.plan;
  for (int d = 0; d < p; ++d) std::memcpy(packed.block_at(d), send + d * block, block);

  std::vector<Transfer> pending, reductions;
  for (int lane = 0; lane < lanes; ++lane) {
    if (lane != my_lane) {
      pending.push_back(
          peers_.Send(local[lane], kReduceInNode, packed.lane_at(lane), packed.lane_bytes(lane)));
    }
  }
  if (my_lane < 0) {
    // A rank without a lane gets its block from the lane rank that holds it.
    pending.push_back(
        peers_.Recv(local[plan.lane_of(me)], kHandOut, RecvSink::Copy(args_.recv), block));
    return peers_.Wait(pending);
  }
  for (int r : local) {
    if (r == me) continue;
    reductions.push_back(peers_.Recv(
        r, kReduceInNode, RecvSink::Reduce(packed.lane_at(my_lane), args_.dtype, args_.op),
        packed.lane_bytes(my_lane)));
  }
  if (absl::Status s = peers_.Wait(reductions); !s.ok()) return s;

  const RankGroup across{nodes.lane_group(my_lane), nodes.node()};
  const std::vector<int>& starts = plan.node_start[my_lane];
  if (across.size() > 1) {
    if (absl::Status s = GroupRingReduceScatter(
            peers_, across, packed.lane_at(my_lane), packed.lane_at(my_lane),
            packed.NodeSegments(my_lane), args_.dtype, args_.op, kReduceScatterAcross);
        !s.ok()) {
      return s;
    }
  }
  // This node's segment of the lane: this rank's block first, then those of the node's ranks
  // without a lane that belong to it.
  for (int i = starts[nodes.node()]; i < starts[nodes.node() + 1]; ++i) {
    const int d = plan.ranks[my_lane][i];
    const std::byte* result = packed.lane_at(my_lane) + i * block;
    if (d == me) {
      std::memcpy(args_.recv, result, block);
    } else {
      pending.push_back(peers_.Send(d, kHandOut, result, block));
    }
  }
  return peers_.Wait(pending);
}

absl::Status HierarchicalReduceScatter::RunByRank() {
  const NodeLayout& nodes = peers_.nodes();
  const int me = peers_.rank(), my_lane = OwnLane(nodes);
  const size_t es = args_.element_bytes(), block = args_.count * es;
  const auto* send = static_cast<const std::byte*>(args_.send);
  const LaneBlocks plan(nodes);
  const std::vector<int>& local = nodes.local_group();
  // This rank's lane, one block per node, accumulates in scratch from its own input's blocks;
  // the other lanes' blocks leave straight from the input, one message per block.
  const int node_count = static_cast<int>(plan.ranks[my_lane].size());
  std::byte* lane = peers_.Scratch(node_count * block);
  std::vector<Transfer> pending, reductions;
  for (int l = 0; l < nodes.lanes(); ++l) {
    for (int k = 0; k < static_cast<int>(plan.ranks[l].size()); ++k) {
      const std::byte* in = send + plan.ranks[l][k] * block;
      const uint32_t step = PipelineStep(k, kReduceInNode);
      if (l != my_lane) {
        pending.push_back(peers_.Send(local[l], step, in, block));
        continue;
      }
      std::memcpy(lane + k * block, in, block);
      for (int r : local) {
        if (r == me) continue;
        reductions.push_back(
            peers_.Recv(r, step, RecvSink::Reduce(lane + k * block, args_.dtype, args_.op), block));
      }
    }
  }
  if (absl::Status s = peers_.Wait(reductions); !s.ok()) return s;
  const RankGroup across{nodes.lane_group(my_lane), nodes.node()};
  if (across.size() > 1) {
    if (absl::Status s = GroupRingReduceScatter(
            peers_, across, lane, lane, Segments::Even(args_.count * node_count, node_count, es),
            args_.dtype, args_.op, kReduceScatterAcross);
        !s.ok()) {
      return s;
    }
  }
  std::memcpy(args_.recv, lane + nodes.node() * block, block);
  return peers_.Wait(pending);
}

}  // namespace weft
