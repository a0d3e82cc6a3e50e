// The NCCL-style bootstrap: rank 0 creates an opaque id string, the caller hands it to every
// rank by its own means, and all ranks create the communicator from it.
//
// The id is "weft1:<host>:<port>:<token hex>". Creating one starts a TcpStoreServer in the
// calling process that lives as long as the returned object (the communicator keeps it).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bootstrap/tcp_store.h"

namespace weft {

struct ParsedUniqueId {
  std::string host;
  int port = 0;
  std::string token;
};

absl::StatusOr<ParsedUniqueId> ParseUniqueId(const std::string& id);
std::string FormatUniqueId(const ParsedUniqueId& id);

// A fresh random token: 32 hex digits from the kernel's CSPRNG.
std::string NewToken();

}  // namespace weft
