#include <cstring>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/hierarchical_group.h"
#include "algorithms/tree.h"

namespace weft {
namespace {

enum Phase { kScatterInNode = 0, kTreeAcross = 1, kSpreadInNode = 2 };

}  // namespace

HierarchicalBroadcast::HierarchicalBroadcast(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status HierarchicalBroadcast::Run() {
  const NodeLayout& nodes = peers_.nodes();
  const size_t es = args_.element_bytes();
  const size_t count = args_.count;
  const int me = peers_.rank(), root = args_.root;
  const bool is_root = me == root;
  auto* data = static_cast<std::byte*>(args_.recv);
  if (is_root && args_.send != args_.recv) std::memcpy(data, args_.send, count * es);
  if (peers_.size() == 1) return absl::OkStatus();

  const int lanes = nodes.lanes();
  const std::vector<int>& local = nodes.local_group();
  const int my_lane = OwnLane(nodes);
  const int root_node = nodes.node_of(root);
  const bool on_root_node = nodes.node() == root_node;
  RankGroup across;
  if (my_lane >= 0) across = {nodes.lane_group(my_lane), nodes.node()};
  // Node indices of this lane's tree across nodes, rooted at the root's node.
  const BinomialTree tree(nodes.node(), nodes.num_nodes(), root_node);

  const LaneChunks pieces(data, count, es, lanes);
  using Piece = LaneChunks::Piece;

  std::vector<Transfer> pending;
  for (size_t c = 0; c < pieces.chunks(); ++c) {
    if (is_root) {
      for (int lane = 0; lane < lanes; ++lane) {
        const Piece p = pieces.piece(c, lane);
        if (local[lane] != me) {
          pending.push_back(
              peers_.Send(local[lane], PipelineStep(c, kScatterInNode), p.at, p.bytes));
        }
      }
    }
    if (my_lane >= 0) {
      const Piece p = pieces.piece(c, my_lane);
      if (!is_root) {
        const bool from_root = on_root_node;
        const int source = from_root ? root : across.ranks[tree.parent];
        const uint32_t step = PipelineStep(c, from_root ? kScatterInNode : kTreeAcross);
        if (absl::Status s =
                peers_.Wait({peers_.Recv(source, step, RecvSink::Copy(p.at), p.bytes)});
            !s.ok()) {
          return s;
        }
      }
      for (int child : tree.children) {
        pending.push_back(
            peers_.Send(across.ranks[child], PipelineStep(c, kTreeAcross), p.at, p.bytes));
      }
      for (int r : local) {
        if (r != me && r != root) {
          pending.push_back(peers_.Send(r, PipelineStep(c, kSpreadInNode), p.at, p.bytes));
        }
      }
    }
    if (!is_root) {
      for (int lane = 0; lane < lanes; ++lane) {
        if (lane == my_lane) continue;
        const Piece p = pieces.piece(c, lane);
        pending.push_back(peers_.Recv(local[lane], PipelineStep(c, kSpreadInNode),
                                      RecvSink::Copy(p.at), p.bytes));
      }
    }
  }
  return peers_.Wait(pending);
}

}  // namespace weft
