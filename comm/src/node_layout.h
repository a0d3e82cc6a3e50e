// NodeLayout: how a communicator's ranks group into nodes (hosts), from the host identities
// every rank all-gathers at creation.
//
// Nodes are numbered by their lowest rank, members of a node by rank, so every rank computes the
// same layout. Hierarchical algorithms work on two kinds of sub-group, both plain lists of the
// communicator's ranks that reuse its links (shared memory inside a node, the network across):
//   - the node-local group: the ranks of one node;
//   - the lane groups: lane j holds local rank j of every node. Only lanes() = the smallest node's
//     size exist, so every lane has exactly one rank on every node, also with uneven nodes (3 + 1
//     ranks: one lane). A rank whose local rank is >= lanes() hands its data to a lane holder of
//     its node and gets the result back from it.
#pragma once

#include <string>
#include <vector>

namespace weft {

class NodeLayout {
 public:
  // A single node holding every rank.
  NodeLayout() = default;
  // `host_ids[r]` is rank r's host identity; `rank` is this process's rank.
  NodeLayout(const std::vector<std::string>& host_ids, int rank);

  int num_nodes() const { return static_cast<int>(members_.size()); }
  int node() const { return node_; }  // this rank's node
  int local_rank() const { return local_rank_; }
  int node_of(int rank) const { return node_of_[rank]; }
  int local_rank_of(int rank) const { return local_rank_of_[rank]; }
  // The ranks of node `node`, ascending.
  const std::vector<int>& members(int node) const { return members_[node]; }
  const std::vector<int>& local_group() const { return members_[node_]; }
  int local_size() const { return static_cast<int>(members_[node_].size()); }
  int lanes() const { return lanes_; }
  // Lane j's rank on node `node` (j < lanes()).
  int lane_rank(int lane, int node) const { return members_[node][lane]; }
  // The lane ranks of lane j, one per node, in node order.
  std::vector<int> lane_group(int lane) const;
  // Whether nodes differ in size.
  bool uneven() const;
  int max_local_size() const;

  // e.g. "2 nodes x 2 ranks" or "2 nodes (3+1 ranks)".
  std::string Describe() const;

 private:
  int node_ = 0;
  int local_rank_ = 0;
  int lanes_ = 1;
  std::vector<int> node_of_ = {0};
  std::vector<int> local_rank_of_ = {0};
  std::vector<std::vector<int>> members_ = {{0}};
};

}  // namespace weft
