// Which network interfaces the TCP transport listens on and offers to its peers.
//
// WEFT_SOCKET_IFNAME follows NCCL_SOCKET_IFNAME: a comma-separated list of interface name
// prefixes ("eth,ib"); a leading '^' turns it into a list to exclude ("^docker,lo"); a '=' (after
// the '^', if any) makes the names exact instead of prefixes ("=eth0", "^=eth1"). Unset or empty
// means every interface that is up.
//
// The chosen addresses are offered to peers in order: non-loopback interfaces first, loopback
// last, because a loopback address reaches a peer only when it lives on the same host.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/tcp/socket.h"

namespace weft::tcp {

// One IPv4 address of one interface ("eth0", 192.0.2.2).
struct InterfaceAddress {
  std::string name;
  SocketAddress address;
};

// A parsed WEFT_SOCKET_IFNAME.
class InterfaceFilter {
 public:
  explicit InterfaceFilter(absl::string_view spec);

  bool Matches(absl::string_view name) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// The IPv4 addresses of this host's interfaces that are up, in getifaddrs() order.
absl::StatusOr<std::vector<InterfaceAddress>> EnumerateInterfaces();

// The addresses of `all` whose interface passes `spec` (WEFT_SOCKET_IFNAME), non-loopback first
// and otherwise in their original order. Fails, listing what exists and what to do, when nothing
// passes.
absl::StatusOr<std::vector<InterfaceAddress>> SelectInterfaces(
    const std::vector<InterfaceAddress>& all, absl::string_view spec);

// "eth0 192.0.2.2, lo 127.0.0.1": a list for messages.
std::string DescribeInterfaces(const std::vector<InterfaceAddress>& addresses);

}  // namespace weft::tcp
