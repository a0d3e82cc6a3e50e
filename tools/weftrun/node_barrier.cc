#include "node_barrier.h"

#include <poll.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "bootstrap/tcp_store.h"
#include "deadline.h"

namespace weft::launcher {
namespace {

constexpr char kNodesDoneKey[] = "weftrun/nodes_done";
// The store either is up by now (the ranks used it) or is gone for good with node 0's launcher,
// so connecting is not retried for long.
constexpr absl::Duration kConnectBound = absl::Seconds(1);
// How often node 0 asks how many nodes are done; between asks it sleeps on the signalfd.
constexpr int kAskEveryMs = 200;

}  // namespace

absl::StatusOr<int> FinishNode(const NodeBarrier& barrier, bool wait, absl::Time until,
                               SignalChannel& signals) {
  const std::string where = absl::StrCat("node 0's store at ", barrier.host, ":", barrier.port);
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> store = TcpStoreClient::Connect(
      barrier.host, barrier.port, barrier.token, Deadline::In(kConnectBound));
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("telling ", where, " that node ", barrier.node_rank,
                                     " is done: ", store.status().message()));
  }
  absl::StatusOr<int64_t> done = (*store)->Add(kNodesDoneKey, 1);
  if (!done.ok()) {
    return absl::Status(done.status().code(),
                        absl::StrCat("telling ", where, " that node ", barrier.node_rank,
                                     " is done: ", done.status().message()));
  }
  if (!wait) return 0;

  const Deadline deadline = Deadline::At(until);
  bool announced = false;
  while (*done < barrier.nnodes) {
    if (!announced) {
      fprintf(stderr,
              "weftrun: this node's ranks have ended; keeping the rendezvous store up until the "
              "other nodes' ranks end too (%lld of %d nodes done)\n",
              static_cast<long long>(*done), barrier.nnodes);
      announced = true;
    }
    if (deadline.Expired()) {
      fprintf(stderr,
              "weftrun: gave up waiting for the other nodes' ranks to end (%lld of %d nodes "
              "done); closing the rendezvous store\n",
              static_cast<long long>(*done), barrier.nnodes);
      return 0;
    }
    pollfd pfd{signals.fd(), POLLIN, 0};
    if (poll(&pfd, 1, deadline.PollTimeoutMs(kAskEveryMs)) > 0) {
      for (int signo : signals.ReadPending()) {
        if (signo != SIGCHLD) return signo;
      }
    }
    done = (*store)->Add(kNodesDoneKey, 0);
    if (!done.ok()) {
      return absl::Status(
          done.status().code(),
          absl::StrCat("asking ", where, " how many nodes are done: ", done.status().message()));
    }
  }
  return 0;
}

}  // namespace weft::launcher
