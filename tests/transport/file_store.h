// FileStore: a Store kept as files in a directory that every rank can see.
//
// For ranks on one host (or a shared file system) that have no rendezvous server, and for tests
// of transports that must not depend on the TCP store. Each key is a file written atomically
// (temporary file, then rename); Add serialises through flock().
#pragma once

#include <string>

#include "bootstrap/store.h"

namespace weft {

class FileStore final : public Store {
 public:
  // `directory` must exist.
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, const Deadline& deadline) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;

 private:
  std::string PathOf(absl::string_view key) const;

  std::string directory_;
};

}  // namespace weft
