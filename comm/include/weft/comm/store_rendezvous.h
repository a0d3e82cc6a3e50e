// Creating a communicator through a framework's own key-value store, as NCCL's ProcessGroup
// does: rank 0 makes a unique id (Communicator::CreateUniqueId) and sets it in the framework's
// store under a key unique to this communicator; every other rank gets it from there, waiting
// up to the creation timeout; then all call Communicator::Create(id, rank, size).
//
//   class TorchStore : public weft::ExternalStore { ... wraps c10d::Store ... };
//   auto comm = weft::CreateWithStore(store, "weft/" + std::to_string(counter++), rank, size);
//
// The framework's store carries only the id; the communicator then rendezvouses through the
// server that creating the id started in rank 0's process. The id holds the job's secret token,
// so whoever can read the store can join the communicator.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"

namespace weft {

// A framework's key-value store, as Weft needs it for a rendezvous: set a key once, get it with
// a deadline. Called only from the threads that call CreateWithStore.
class ExternalStore {
 public:
  virtual ~ExternalStore() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key` to be set; DeadlineExceeded when it was not.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

// Collective: a communicator of `size` ranks whose unique id travels through `store` under
// `key`. Every rank passes the same key, and each communicator made from one store needs a key
// of its own (a counter, as ProcessGroupNCCL keeps). The wait for the key and the creation are
// each bounded by the communicator's timeout (options.timeout, WEFT_TIMEOUT, 300 s).
absl::StatusOr<std::unique_ptr<Communicator>> CreateWithStore(ExternalStore& store,
                                                              const std::string& key, int rank,
                                                              int size,
                                                              const CommOptions& options = {});

}  // namespace weft
