// Reachability checks for weft-info: can this host accept connections on each of its addresses,
// and can it reach a given peer (the job's store, another node) — and through which interface.
//
// Every check is a real TCP connection with a short timeout, so a firewall, a missing route or a
// wrong address shows up as the error a rank would get, before a job waits on it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weft::info {

// Listens on `ip` (an address of this host) and connects to that listener. OK or why not.
absl::Status CheckLocalAddress(const std::string& ip, absl::Duration timeout);

// Connects to host:port (IPv4 or a name). Returns the local address the connection left from.
absl::StatusOr<std::string> CheckPeer(const std::string& host, int port, absl::Duration timeout);

}  // namespace weft::info
