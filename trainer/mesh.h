// Mesh: the job's ranks as a grid of dp × tp × pp, and the communicators of its groups.
//
// World rank w sits at tp index w mod tp, dp index (w / tp) mod dp and pp index w / (tp · dp):
// tensor-parallel groups are consecutive ranks (on real machines they share a node and its fast
// links, which their per-layer collectives need), data-parallel groups stride by tp. The groups'
// communicators are split from the world once, at start; a group of one rank has none.
//
//   world 8, tp 2, dp 2, pp 2:  tp groups {0,1} {2,3} {4,5} {6,7}; dp groups {0,2} {1,3} {4,6}
//                               {5,7}; pp groups {0,4} {1,5} {2,6} {3,7}
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config.h"
#include "weft/comm/communicator.h"

namespace weft::trainer {

class Mesh {
 public:
  // Collective over `world` (null: one process); `config` has passed Validate for its size.
  static absl::StatusOr<Mesh> Create(const Config& config, Communicator* world);

  int tp() const { return tp_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int tp_rank() const { return rank_ % tp_; }
  int dp_rank() const { return rank_ / tp_ % dp_; }
  int pp_rank() const { return rank_ / (tp_ * dp_); }
  // This rank's tensor-parallel group (null when tp = 1).
  Communicator* tp_comm() const { return tp_comm_.get(); }
  // This rank's data-parallel group (null when dp = 1; the world itself when tp = pp = 1).
  Communicator* dp_comm() const { return dp_comm_; }
  // This rank's pipeline group, ordered by stage (null when pp = 1).
  Communicator* pp_comm() const { return pp_comm_.get(); }

  // Which world ranks form each group, and the host of each rank, for rank 0 to print.
  std::string Describe() const;

 private:
  int rank_ = 0;
  int tp_ = 1, dp_ = 1, pp_ = 1;
  std::vector<std::string> hosts_;  // per world rank
  std::unique_ptr<Communicator> tp_comm_, dp_split_, pp_comm_;
  Communicator* dp_comm_ = nullptr;
};

}  // namespace weft::trainer
