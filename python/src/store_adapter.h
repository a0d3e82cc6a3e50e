// StoreAdapter: the framework's c10d::Store as the weft::ExternalStore that CreateWithStore
// rendezvouses through, so that a process group needs no store of Weft's own.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "torch/csrc/distributed/c10d/Store.hpp"
#include "weft/comm/store_rendezvous.h"

namespace weft::torch_backend {

class StoreAdapter : public ExternalStore {
 public:
  explicit StoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  // The store's exceptions become statuses carrying their message.
  absl::Status Set(const std::string& key, const std::string& value) override;
  // Waits for the key (forever for an infinite timeout), then reads it.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace weft::torch_backend
