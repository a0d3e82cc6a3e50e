#include "algorithms/hierarchical_group.h"

namespace weft {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

LaneBlocks::LaneBlocks(const NodeLayout& nodes) {
  const int lanes = nodes.lanes();
  int size = 0;
  for (int k = 0; k < nodes.num_nodes(); ++k) size += static_cast<int>(nodes.members(k).size());
  lane_of_rank.assign(size, 0);
  index_of_rank.assign(size, 0);
  ranks.assign(lanes, {});
  node_start.assign(lanes, {});
  for (int lane = 0; lane < lanes; ++lane) {
    for (int k = 0; k < nodes.num_nodes(); ++k) {
      node_start[lane].push_back(static_cast<int>(ranks[lane].size()));
      const std::vector<int>& members = nodes.members(k);
      for (size_t l = lane; l < members.size(); l += lanes) {
        lane_of_rank[members[l]] = lane;
        index_of_rank[members[l]] = static_cast<int>(ranks[lane].size());
        ranks[lane].push_back(members[l]);
      }
    }
    node_start[lane].push_back(static_cast<int>(ranks[lane].size()));
  }
  size_t blocks = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    first_block.push_back(blocks);
    blocks += ranks[lane].size();
  }
}

Segments Segments::Even(size_t count, int parts, size_t element_bytes, size_t base) {
  const Partition partition(count, parts);
  Segments segments;
  segments.offset.reserve(parts);
  segments.bytes.reserve(parts);
  for (int i = 0; i < parts; ++i) {
    segments.offset.push_back(base + partition.offset(i) * element_bytes);
    segments.bytes.push_back(partition.size(i) * element_bytes);
  }
  return segments;
}

absl::Status GroupRingReduceScatter(Peers& peers, const RankGroup& group, std::byte* data,
                                    const Segments& segments, DataType dtype, ReduceOp op,
                                    uint32_t step) {
  const int n = group.size(), me = group.me;
  const int right = group.at(me + 1), left = group.at(me - 1);
  // After step s, segment me-s-2 holds the reduction over members me-s-2 .. me.
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(me - s - 1, n), in = Mod(me - s - 2, n);
    Transfer sent = peers.Send(right, step + s, data + segments.offset[out], segments.bytes[out]);
    Transfer received =
        peers.Recv(left, step + s, RecvSink::Reduce(data + segments.offset[in], dtype, op),
                   segments.bytes[in]);
    if (absl::Status st = peers.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status GroupRingAllGather(Peers& peers, const RankGroup& group, std::byte* data,
                                const Segments& segments, uint32_t step) {
  const int n = group.size(), me = group.me;
  const int right = group.at(me + 1), left = group.at(me - 1);
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(me - s, n), in = Mod(me - s - 1, n);
    Transfer sent = peers.Send(right, step + s, data + segments.offset[out], segments.bytes[out]);
    Transfer received =
        peers.Recv(left, step + s, RecvSink::Copy(data + segments.offset[in]), segments.bytes[in]);
    if (absl::Status st = peers.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace weft
