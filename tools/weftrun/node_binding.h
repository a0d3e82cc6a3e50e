// Which CPUs each of this node's ranks is bound to, from WEFT_BIND (see
// weft/topology/binding.h for the policies).
//
// The launcher is where binding belongs: it alone knows every local rank of the node, so the
// ranks that share a device split its cores instead of piling onto the same ones. weftrun's own
// affinity stands for what the launcher above it (Slurm, taskset) decided: when it is narrower
// than the host, nothing is bound.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::launcher {

struct NodeBinding {
  std::vector<std::optional<cpu_set_t>> affinity;  // per local rank; empty with WEFT_BIND off
  std::vector<std::string> notes;                  // one line per rank saying what was decided
};

// Reads WEFT_BIND, WEFT_SOCKET_IFNAME and the topology (WEFT_TOPO_FILE or detection). Fails on a
// bad WEFT_BIND value or an unreadable topology when binding was asked for.
absl::StatusOr<NodeBinding> PlanNodeBinding(int local_size, int first_rank);

}  // namespace weft::launcher
