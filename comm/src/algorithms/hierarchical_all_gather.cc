#include <cstring>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/hierarchical_group.h"

namespace weft {
namespace {

enum Phase { kCollectInNode = 0, kAllGatherAcross = 1, kSpreadInNode = 2 };

}  // namespace

HierarchicalAllGather::HierarchicalAllGather(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status HierarchicalAllGather::Run() {
  const NodeLayout& nodes = peers_.nodes();
  const int p = peers_.size(), me = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  if (p == 1) {
    if (send != recv) std::memcpy(recv, send, block);
    return absl::OkStatus();
  }
  if (EveryRankHasALane(nodes)) return RunByRank();
  const int lanes = nodes.lanes();
  const std::vector<int>& local = nodes.local_group();
  const int my_lane = OwnLane(nodes);
  const PackedBlocks packed(nodes, peers_.Scratch(block * p), block);
  const LaneBlocks& plan = packed.plan;

  std::vector<Transfer> pending;
  if (my_lane < 0) {
    pending.push_back(peers_.Send(local[plan.lane_of(me)], kCollectInNode, send, block));
  } else {
    std::memcpy(packed.block_at(me), send, block);
    std::vector<Transfer> collected;
    const std::vector<int>& starts = plan.node_start[my_lane];
    for (int i = starts[nodes.node()]; i < starts[nodes.node() + 1]; ++i) {
      const int d = plan.ranks[my_lane][i];
      if (d != me) {
        collected.push_back(
            peers_.Recv(d, kCollectInNode, RecvSink::Copy(packed.block_at(d)), block));
      }
    }
    if (absl::Status s = peers_.Wait(collected); !s.ok()) return s;
    const RankGroup across{nodes.lane_group(my_lane), nodes.node()};
    if (across.size() > 1) {
      if (absl::Status s = GroupRingAllGather(peers_, across, packed.lane_at(my_lane),
                                              packed.NodeSegments(my_lane), kAllGatherAcross);
          !s.ok()) {
        return s;
      }
    }
    for (int r : local) {
      if (r != me) {
        pending.push_back(
            peers_.Send(r, kSpreadInNode, packed.lane_at(my_lane), packed.lane_bytes(my_lane)));
      }
    }
  }
  for (int lane = 0; lane < lanes; ++lane) {
    if (lane != my_lane) {
      pending.push_back(peers_.Recv(local[lane], kSpreadInNode,
                                    RecvSink::Copy(packed.lane_at(lane)), packed.lane_bytes(lane)));
    }
  }
  if (absl::Status s = peers_.Wait(pending); !s.ok()) return s;
  for (int d = 0; d < p; ++d) std::memcpy(recv + d * block, packed.block_at(d), block);
  return absl::OkStatus();
}

absl::Status HierarchicalAllGather::RunByRank() {
  const NodeLayout& nodes = peers_.nodes();
  const int me = peers_.rank(), my_lane = OwnLane(nodes);
  const size_t block = args_.count * args_.element_bytes();
  auto* recv = static_cast<std::byte*>(args_.recv);
  if (args_.send != recv + me * block) std::memcpy(recv + me * block, args_.send, block);
  const LaneBlocks plan(nodes);
  const RankGroup across{nodes.lane_group(my_lane), nodes.node()};
  if (across.size() > 1) {
    const Segments lane = Segments::OfRanks(plan.ranks[my_lane], block);
    if (absl::Status s = GroupRingAllGather(peers_, across, recv, lane, kAllGatherAcross);
        !s.ok()) {
      return s;
    }
  }
  // Each lane rank hands its lane's blocks to the node's other ranks, one message per block.
  const std::vector<int>& local = nodes.local_group();
  std::vector<Transfer> pending;
  for (int lane = 0; lane < nodes.lanes(); ++lane) {
    for (size_t k = 0; k < plan.ranks[lane].size(); ++k) {
      std::byte* at = recv + plan.ranks[lane][k] * block;
      const uint32_t step = PipelineStep(k, kSpreadInNode);
      if (lane != my_lane) {
        pending.push_back(peers_.Recv(local[lane], step, RecvSink::Copy(at), block));
        continue;
      }
      for (int r : local) {
        if (r != me) pending.push_back(peers_.Send(r, step, at, block));
      }
    }
  }
  return peers_.Wait(pending);
}

}  // namespace weft
