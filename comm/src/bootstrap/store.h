// Store: the key-value rendezvous every communicator is built from.
//
// Ranks publish what peers need to reach them (socket addresses, shared-memory names, host
// identities) and wait for what others published. Keys are written once; Get waits until a key
// exists or the deadline passes. Implementations are thread-safe: a communicator and the
// sub-communicators split from it share one Store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "deadline.h"

namespace weft {

class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Waits until `key` has been set, then returns its value.
  virtual absl::StatusOr<std::string> Get(absl::string_view key, const Deadline& deadline) = 0;

  // Atomically adds `delta` to the integer stored at `key` (absent counts as 0) and returns the
  // new value.
  virtual absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) = 0;
};

// A view of `base` in which every key is prefixed with `prefix` + "/": how sub-communicators and
// successive rendezvous rounds keep their keys apart while sharing one connection.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/") {}

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, const Deadline& deadline) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;

  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// Every rank publishes `value` under `key`/<rank> and receives all ranks' values in rank order.
absl::StatusOr<std::vector<std::string>> StoreAllGather(Store& store, absl::string_view key,
                                                        int rank, int size, absl::string_view value,
                                                        const Deadline& deadline);

// Returns once all `size` ranks have entered the barrier named `key`.
absl::Status StoreBarrier(Store& store, absl::string_view key, int rank, int size,
                          const Deadline& deadline);

}  // namespace weft
