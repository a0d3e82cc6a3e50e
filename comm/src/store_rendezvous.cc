#include "weft/comm/store_rendezvous.h"

#include "absl/strings/str_cat.h"
#include "comm_state.h"

namespace weft {
namespace {

// `status` with "rank R: CreateWithStore: <what>: " leading its message.
absl::Status Context(const absl::Status& status, int rank, const std::string& what) {
  return absl::Status(status.code(), absl::StrCat("rank ", rank, ": CreateWithStore: ", what, ": ",
                                                  status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateWithStore(ExternalStore& store,
                                                              const std::string& key, int rank,
                                                              int size,
                                                              const CommOptions& options) {
  // Checked before rank 0 makes an id: an id nobody adopts keeps its server until exit.
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateWithStore: rank ", rank, " is not in [0, ", size, ")"));
  }
  if (key.empty()) return absl::InvalidArgumentError("CreateWithStore: the key is empty");
  absl::StatusOr<internal::CommConfig> config = internal::ResolveConfig(options);
  if (!config.ok()) return config.status();

  std::string id;
  if (rank == 0) {
    absl::StatusOr<std::string> made = Communicator::CreateUniqueId();
    if (!made.ok()) return Context(made.status(), rank, "making the unique id");
    id = *std::move(made);
    if (absl::Status s = store.Set(key, id); !s.ok()) {
      return Context(s, rank, absl::StrCat("setting the unique id under key '", key, "'"));
    }
  } else {
    absl::StatusOr<std::string> got = store.Get(key, config->timeout);
    if (!got.ok()) {
      return Context(got.status(), rank,
                     absl::StrCat("getting rank 0's unique id under key '", key, "' (waited up to ",
                                  absl::FormatDuration(config->timeout), ")"));
    }
    id = *std::move(got);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Create(id, rank, size, options);
  // The id from the store is the job's secret: the message never quotes it.
  if (!comm.ok()) return Context(comm.status(), rank, "creating the communicator from the id");
  return comm;
}

}  // namespace weft
