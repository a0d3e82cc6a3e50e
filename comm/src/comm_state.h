// CommState: everything a communicator is, behind the public Communicator handle.
//
// Creation is the bootstrap: exchange host identities through the store, connect shared-memory
// links to peers on this host and TCP links to the others, map the host's arena when every rank
// is local, and start the engine. Afterwards the user-facing side (sequence numbers, groups) is
// guarded by `mu`, and the executing side (Peers) belongs to the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/selector.h"
#include "bootstrap/store.h"
#include "bootstrap/tcp_store.h"
#include "engine.h"
#include "peers.h"
#include "weft/comm/communicator.h"

namespace weft::internal {

// CommOptions with the environment's defaults applied and validated.
struct CommConfig {
  absl::Duration timeout;
  std::string algorithm_spec;
  std::string transport;  // "auto", "tcp", "shm" or "ucx"
  bool shared_buffers = false;
};
absl::StatusOr<CommConfig> ResolveConfig(const CommOptions& options);

// How a communicator reaches its rendezvous: the store (already private to this communicator),
// and what its children need to make theirs.
struct Rendezvous {
  std::shared_ptr<Store> store;  // prefixed for this communicator
  std::shared_ptr<Store> root;   // the job's store, shared with children
  std::string prefix;            // this communicator's key prefix in `root`
  std::string token;
  std::string job_name;  // unique per job, for shared-memory object names
  // The parent's ranks share this process's cores: a child (split) that sees only some of them
  // still waits as they do.
  bool oversubscribed = false;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 may host the store; keep it alive
};

class CommState {
 public:
  static absl::StatusOr<std::shared_ptr<CommState>> Create(Rendezvous rendezvous, int rank,
                                                           int size, CommConfig config);
  ~CommState();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommConfig& config() const { return config_; }
  Engine& engine() { return *engine_; }
  Peers& peers() { return *peers_; }
  const AlgorithmSelector& selector() const { return selector_; }
  const Rendezvous& rendezvous() const { return rendezvous_; }
  // More ranks run on this host's cores (this communicator's, or its parent's) than there are
  // cores, so its waits yield instead of spinning.
  bool oversubscribed() const { return rendezvous_.oversubscribed; }

  // Guards the fields below (std::mutex: Debian's Abseil is not built for ThreadSanitizer).
  std::mutex mu;
  uint64_t next_collective = 0;
  uint64_t next_split = 0;
  std::vector<uint64_t> sent_to;  // p2p messages per peer
  std::vector<uint64_t> received_from;
  int group_depth = 0;
  std::vector<std::unique_ptr<Op>> group_ops;
  std::shared_ptr<OpState> group_state;

 private:
  CommState(Rendezvous rendezvous, int rank, int size, CommConfig config,
            AlgorithmSelector selector);

  Rendezvous rendezvous_;
  const int rank_;
  const int size_;
  const CommConfig config_;
  AlgorithmSelector selector_;  // its tuner is set once, at creation
  std::unique_ptr<Peers> peers_;
  std::shared_ptr<Engine> engine_;
};

// The state behind a handle, for tests of what the public API does not show.
const CommState& StateOf(const Communicator& comm);

}  // namespace weft::internal
