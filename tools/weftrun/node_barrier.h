// The end of a multi-node job: node 0's launcher hosts the rendezvous store, so it must not exit
// while another node's ranks may still use it.
//
// Every node's launcher, once its ranks have ended, counts itself done in the store. Node 0's
// launcher, when its own ranks all succeeded, then keeps the store up until every node has
// counted itself done. After a failure it does not wait: the store closes with it, and the other
// nodes' ranks fail at their next use of the store rather than wait out their own deadlines.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "signal_channel.h"

namespace weft::launcher {

// How long node 0 waits for the other nodes when the job set no --timeout (torchrun's default).
inline constexpr absl::Duration kNodeBarrierTimeout = absl::Minutes(5);

struct NodeBarrier {
  std::string host;  // the store's address as this node reaches it
  int port = 0;
  std::string token;
  int node_rank = 0;
  int nnodes = 1;
};

// Counts this node done. With `wait` (node 0, whose ranks all succeeded) it then waits until
// every node is done, `until` passes (it says so on stderr and returns 0) or SIGINT, SIGTERM or
// SIGHUP arrives (returned, so that the launcher can die by it). Fails when the store cannot be
// reached.
absl::StatusOr<int> FinishNode(const NodeBarrier& barrier, bool wait, absl::Time until,
                               SignalChannel& signals);

}  // namespace weft::launcher
