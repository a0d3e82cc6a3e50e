// FaultWatch: makes one rank's failure every rank's failure, at once, and names the ranks.
//
// Links only notice the peers they wait on: when rank 2 dies in a ring all-reduce, its
// neighbours fail within milliseconds, but rank 0, waiting on rank 1 (alive, but now failed),
// would wait for its deadline. So a rank whose operation fails publishes its error through the
// rendezvous store to every other rank, and each rank's watch thread, parked on its own key,
// hands the report to the engine, which ends the running operation and fails later ones with it.
// The store is the side channel because it is independent of the links that just broke.
//
// At creation the ranks also exchange who they are (pid, host), so every error can say which
// process a rank is, and a failure can list the ranks of this host whose processes have exited.
//
// The thread also notices SIGUSR1 (flight_recorder.h) and asks for a flight recorder dump.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bootstrap/store.h"
#include "deadline.h"

namespace weft {

// Who a rank is, as it told the others at creation.
struct RankProcess {
  int64_t pid = 0;
  std::string pid_namespace;  // PidNamespaceId(); "" when unknown
  std::string host_id;        // HostIdentity()
  std::string host;           // HostName(), for messages
};

// One rank's entry of the exchange, and its reading (fuzzed: it comes from another process).
std::string FormatRankProcess(const RankProcess& process);
absl::StatusOr<RankProcess> ParseRankProcess(absl::string_view text);

class FaultWatch {
 public:
  struct Callbacks {
    // Another rank failed; `report` is its error message. Called at most once.
    std::function<void(const std::string& report)> on_fault;
    // SIGUSR1 arrived.
    std::function<void()> on_dump_signal;
  };

  // Collective over the communicator: exchanges the ranks' processes through `store` (this
  // communicator's key space), then starts the watch thread, which parks its Gets on
  // `watch_store` (the same key space; best a connection of its own, so its long Gets never
  // delay the communicator's other store traffic).
  static absl::StatusOr<std::unique_ptr<FaultWatch>> Start(std::shared_ptr<Store> store,
                                                           std::shared_ptr<Store> watch_store,
                                                           int rank, int size,
                                                           const Deadline& deadline,
                                                           Callbacks callbacks);
  // Stops the thread; bounded by one store round trip.
  ~FaultWatch();
  FaultWatch(const FaultWatch&) = delete;
  FaultWatch& operator=(const FaultWatch&) = delete;

  // Tells every other rank that this rank failed with `report` (the first call only; the rest
  // are ignored). Best effort: a store that is gone loses the report, and the peers then fail on
  // their own links or deadlines.
  void Publish(absl::string_view report);

  // A report another rank already published for this one, or "" (one immediate store look, no
  // waiting). A rank that fails publishes before its process can exit, so when a link reports its
  // peer gone, the reason the peer went is already here, ahead of the watch thread's delivery.
  std::string PendingReport() const;

  // For a mismatched collective: publishes what this rank called as operation #`seq` (`call`,
  // e.g. "all_reduce(count=4096, float, sum)"), collects the other ranks' entries (each failing
  // rank publishes its own; at most `wait` for them all) and returns how the calls differ:
  // "rank 3 called all_gather(count=1024, float) as op #57, ranks 0-2 called all_reduce(...)".
  // Ranks that did not answer in time are listed as such; "" when every answer agrees.
  std::string CompareCalls(uint64_t seq, const std::string& call, absl::Duration wait) const;
  // Only the publishing half, for a rank that does not run operation #`seq` (an earlier failure
  // stopped it) but whose peers may be comparing it.
  void PublishCall(uint64_t seq, const std::string& call) const;

  // "pid 4321 on host node7" for rank `r`.
  std::string Describe(int r) const;
  // The ranks on this host whose processes have exited, e.g. "rank 2 (pid 4321 on host node7)",
  // comma separated; "" when none (ranks on other hosts cannot be checked from here).
  std::string ExitedRanks() const;

 private:
  FaultWatch(std::shared_ptr<Store> store, std::shared_ptr<Store> watch_store, int rank,
             std::vector<RankProcess> processes, Callbacks callbacks);
  // `signals_seen`: SIGUSR1s counted before the watch began; each later one dumps.
  void Loop(uint64_t signals_seen);

  const std::shared_ptr<Store> store_;
  const std::shared_ptr<Store> watch_store_;
  const int rank_;
  const std::vector<RankProcess> processes_;
  const Callbacks callbacks_;
  const std::string own_pid_namespace_;
  const std::string own_host_id_;
  std::atomic<bool> published_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable wake_;  // ends the sleeps of a watch whose store is unreachable
  std::thread thread_;
};

}  // namespace weft
