#include "algorithms/hierarchical_group.h"

#include <algorithm>

namespace weft {
namespace {

// One lane's piece of a pipeline chunk, in bytes.
constexpr size_t kLaneChunkBytes = 1 << 20;
// PipelineStep numbers at most this many chunks.
constexpr size_t kMaxChunks = size_t{1} << 19;

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

Segments PackedBlocks::NodeSegments(int lane) const {
  const std::vector<int>& starts = plan.node_start[lane];
  Segments segments;
  for (size_t k = 0; k + 1 < starts.size(); ++k) {
    segments.offset.push_back(starts[k] * block);
    segments.bytes.push_back((starts[k + 1] - starts[k]) * block);
  }
  return segments;
}

LaneChunks::LaneChunks(std::byte* data, size_t count, size_t element_bytes, int lanes)
    : data_(data), count_(count), element_bytes_(element_bytes), lanes_(lanes) {
  chunk_ = std::max<size_t>(1, kLaneChunkBytes / element_bytes) * lanes;
  chunk_ = std::max(chunk_, (count + kMaxChunks - 1) / kMaxChunks);
  chunks_ = (count + chunk_ - 1) / chunk_;
}

LaneChunks::Piece LaneChunks::piece(size_t chunk, int lane) const {
  const size_t offset = chunk * chunk_;
  const Partition parts(std::min(chunk_, count_ - offset), lanes_);
  return Piece{data_ + (offset + parts.offset(lane)) * element_bytes_,
               parts.size(lane) * element_bytes_};
}

}  // namespace weft
