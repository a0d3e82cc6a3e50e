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
  const LaneBlocks plan(nodes);
  const int lanes = nodes.lanes();
  const std::vector<int>& local = nodes.local_group();
  const int my_lane = nodes.local_rank() < lanes ? nodes.local_rank() : -1;

  // Blocks packed by lane, so each lane's transfers are single contiguous messages.
  std::byte* work = peers_.Scratch(block * p);
  auto lane_at = [&](int lane) { return work + plan.first_block[lane] * block; };
  auto lane_bytes = [&](int lane) { return plan.ranks[lane].size() * block; };
  auto block_at = [&](int rank) {
    return lane_at(plan.lane_of(rank)) + plan.index_of_rank[rank] * block;
  };

  std::vector<Transfer> pending;
  if (my_lane < 0) {
    pending.push_back(peers_.Send(local[plan.lane_of(me)], kCollectInNode, send, block));
  } else {
    std::memcpy(block_at(me), send, block);
    std::vector<Transfer> collected;
    const std::vector<int>& starts = plan.node_start[my_lane];
    for (int i = starts[nodes.node()]; i < starts[nodes.node() + 1]; ++i) {
      const int d = plan.ranks[my_lane][i];
      if (d != me) {
        collected.push_back(peers_.Recv(d, kCollectInNode, RecvSink::Copy(block_at(d)), block));
      }
    }
    if (absl::Status s = peers_.Wait(collected); !s.ok()) return s;
    const RankGroup across{nodes.lane_group(my_lane), nodes.node()};
    if (across.size() > 1) {
      Segments segments;
      for (int k = 0; k < across.size(); ++k) {
        segments.offset.push_back(starts[k] * block);
        segments.bytes.push_back((starts[k + 1] - starts[k]) * block);
      }
      if (absl::Status s =
              GroupRingAllGather(peers_, across, lane_at(my_lane), segments, kAllGatherAcross);
          !s.ok()) {
        return s;
      }
    }
    for (int r : local) {
      if (r != me) {
        pending.push_back(peers_.Send(r, kSpreadInNode, lane_at(my_lane), lane_bytes(my_lane)));
      }
    }
  }
  for (int lane = 0; lane < lanes; ++lane) {
    if (lane != my_lane) {
      pending.push_back(
          peers_.Recv(local[lane], kSpreadInNode, RecvSink::Copy(lane_at(lane)), lane_bytes(lane)));
    }
  }
  if (absl::Status s = peers_.Wait(pending); !s.ok()) return s;
  for (int d = 0; d < p; ++d) std::memcpy(recv + d * block, block_at(d), block);
  return absl::OkStatus();
}

}  // namespace weft
