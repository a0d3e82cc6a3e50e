#include <cstring>
#include <utility>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/hierarchical_group.h"

namespace weft {
namespace {

enum Phase { kReduceInNode = 0, kReduceScatterAcross = 1, kAllGatherAcross = 2, kSpreadInNode = 3 };

}  // namespace

HierarchicalAllReduce::HierarchicalAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status HierarchicalAllReduce::Run() {
  const NodeLayout& nodes = peers_.nodes();
  const size_t es = args_.element_bytes();
  const size_t count = args_.count;
  auto* data = static_cast<std::byte*>(args_.recv);
  const auto* input = static_cast<const std::byte*>(args_.send);
  if (peers_.size() == 1) {
    if (input != data) std::memcpy(data, input, count * es);
    return absl::OkStatus();
  }

  const int lanes = nodes.lanes();
  const std::vector<int>& local = nodes.local_group();
  const int my_lane = OwnLane(nodes);
  RankGroup across;
  if (my_lane >= 0) across = {nodes.lane_group(my_lane), nodes.node()};

  const LaneChunks pieces(data, count, es, lanes);
  using Piece = LaneChunks::Piece;
  auto input_of = [&](const Piece& p) { return input + (p.at - data); };

  std::vector<Transfer> pending;  // waited for at the end only
  std::vector<Transfer> reducing, reducing_next;
  // Phase 1 of chunk c: every piece goes to its lane rank, which reduces it on receipt. Only the
  // lane's own piece is copied to the output first: the rest is sent from the input and arrives
  // finished in phase 3.
  auto reduce_in_node = [&](size_t c, std::vector<Transfer>& reductions) {
    for (int lane = 0; lane < lanes; ++lane) {
      const Piece p = pieces.piece(c, lane);
      const uint32_t step = PipelineStep(c, kReduceInNode);
      if (lane != my_lane) {
        pending.push_back(peers_.Send(local[lane], step, input_of(p), p.bytes));
        continue;
      }
      if (input != data && p.bytes > 0) std::memcpy(p.at, input_of(p), p.bytes);
      for (int r : local) {
        if (r == peers_.rank()) continue;
        reductions.push_back(
            peers_.Recv(r, step, RecvSink::Reduce(p.at, args_.dtype, args_.op), p.bytes));
      }
    }
  };

  reduce_in_node(0, reducing);
  for (size_t c = 0; c < pieces.chunks(); ++c) {
    if (absl::Status s = peers_.Wait(reducing); !s.ok()) return s;
    reducing.clear();
    if (c + 1 < pieces.chunks()) reduce_in_node(c + 1, reducing_next);
    if (my_lane >= 0) {
      const Piece p = pieces.piece(c, my_lane);
      if (across.size() > 1) {
        const Segments segments = Segments::Even(p.bytes / es, across.size(), es);
        if (absl::Status s =
                GroupRingReduceScatter(peers_, across, p.at, p.at, segments, args_.dtype, args_.op,
                                       PipelineStep(c, kReduceScatterAcross));
            !s.ok()) {
          return s;
        }
        if (absl::Status s = GroupRingAllGather(peers_, across, p.at, segments,
                                                PipelineStep(c, kAllGatherAcross));
            !s.ok()) {
          return s;
        }
      }
      for (int r : local) {
        if (r != peers_.rank()) {
          pending.push_back(peers_.Send(r, PipelineStep(c, kSpreadInNode), p.at, p.bytes));
        }
      }
    }
    // Phase 3: the other lanes' finished pieces arrive from their lane ranks.
    for (int lane = 0; lane < lanes; ++lane) {
      if (lane == my_lane) continue;
      const Piece p = pieces.piece(c, lane);
      pending.push_back(
          peers_.Recv(local[lane], PipelineStep(c, kSpreadInNode), RecvSink::Copy(p.at), p.bytes));
    }
    std::swap(reducing, reducing_next);
  }
  return peers_.Wait(pending);
}

}  // namespace weft
