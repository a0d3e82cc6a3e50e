#include "node_layout.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft {

NodeLayout::NodeLayout(const std::vector<std::string>& host_ids, int rank) {
  const int size = static_cast<int>(host_ids.size());
  std::map<std::string, int> node_by_host;
  members_.clear();
  node_of_.assign(size, 0);
  local_rank_of_.assign(size, 0);
  for (int r = 0; r < size; ++r) {
    auto [it, added] = node_by_host.emplace(host_ids[r], static_cast<int>(members_.size()));
    if (added) members_.emplace_back();
    node_of_[r] = it->second;
    local_rank_of_[r] = static_cast<int>(members_[it->second].size());
    members_[it->second].push_back(r);
  }
  node_ = node_of_[rank];
  local_rank_ = local_rank_of_[rank];
  lanes_ = size;
  for (const std::vector<int>& node : members_) {
    lanes_ = std::min(lanes_, static_cast<int>(node.size()));
  }
}

std::vector<int> NodeLayout::lane_group(int lane) const {
  std::vector<int> group;
  group.reserve(members_.size());
  for (const std::vector<int>& node : members_) group.push_back(node[lane]);
  return group;
}

bool NodeLayout::uneven() const { return max_local_size() != lanes_; }

int NodeLayout::max_local_size() const {
  size_t most = 0;
  for (const std::vector<int>& node : members_) most = std::max(most, node.size());
  return static_cast<int>(most);
}

std::string NodeLayout::Describe() const {
  if (!uneven()) {
    return absl::StrCat(num_nodes(), num_nodes() == 1 ? " node x " : " nodes x ", lanes_,
                        lanes_ == 1 ? " rank" : " ranks");
  }
  return absl::StrCat(num_nodes(), " nodes (",
                      absl::StrJoin(members_, "+",
                                    [](std::string* out, const std::vector<int>& node) {
                                      absl::StrAppend(out, node.size());
                                    }),
                      " ranks)");
}

}  // namespace weft
