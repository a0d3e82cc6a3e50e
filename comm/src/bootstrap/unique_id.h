// The NCCL-style bootstrap: rank 0 creates an opaque id string, the caller hands it to every
// rank by its own means, and all ranks create the communicator from it.
//
// The id is "weft1:<host>:<port>:<token hex>", with an IPv6 host written in brackets
// ("weft1:[fe80::1]:29500:..."). Creating one starts a TcpStoreServer in the calling process that
// lives as long as the returned object (the communicator keeps it). The id holds the job's secret,
// so errors about a malformed id never repeat its token.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bootstrap/tcp_store.h"

namespace weft {

struct ParsedUniqueId {
  std::string host;  // without brackets
  int port = 0;
  std::string token;
};

inline constexpr size_t kMaxUniqueIdTokenChars = 256;

// Strict: the "weft1:" prefix, a non-empty host without whitespace, a decimal port in 1..65535
// and a token of hex digits (at most kMaxUniqueIdTokenChars). Anything else is InvalidArgument.
absl::StatusOr<ParsedUniqueId> ParseUniqueId(const std::string& id);
std::string FormatUniqueId(const ParsedUniqueId& id);

// A fresh random token: 32 lowercase hex digits from the kernel's CSPRNG (getrandom(), else
// /dev/urandom). Empty only when neither can be read; TcpStoreServer::Start refuses an empty
// token, so that failure surfaces as an error rather than as a guessable token.
std::string NewToken();

}  // namespace weft
