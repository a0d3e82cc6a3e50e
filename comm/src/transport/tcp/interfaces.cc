#include "transport/tcp/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weft::tcp {

InterfaceFilter::InterfaceFilter(absl::string_view spec) {
  spec = absl::StripAsciiWhitespace(spec);
  exclude_ = absl::ConsumePrefix(&spec, "^");
  exact_ = absl::ConsumePrefix(&spec, "=");
  for (absl::string_view name : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    names_.emplace_back(absl::StripAsciiWhitespace(name));
  }
}

bool InterfaceFilter::Matches(absl::string_view name) const {
  // An empty list selects everything; "^" with an empty list excludes nothing.
  if (names_.empty()) return true;
  const bool listed = std::any_of(names_.begin(), names_.end(), [&](const std::string& entry) {
    return exact_ ? name == entry : absl::StartsWith(name, entry);
  });
  return listed != exclude_;
}

absl::StatusOr<std::vector<InterfaceAddress>> EnumerateInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::UnavailableError(
        absl::StrCat("listing network interfaces (getifaddrs): ", ErrnoText(errno)));
  }
  std::vector<InterfaceAddress> found;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0) continue;
    found.push_back(InterfaceAddress{
        it->ifa_name, SocketAddress(*reinterpret_cast<const sockaddr_in*>(it->ifa_addr))});
  }
  freeifaddrs(list);
  return found;
}

absl::StatusOr<std::vector<InterfaceAddress>> SelectInterfaces(
    const std::vector<InterfaceAddress>& all, absl::string_view spec) {
  const InterfaceFilter filter(spec);
  std::vector<InterfaceAddress> chosen;
  for (const InterfaceAddress& candidate : all) {
    if (filter.Matches(candidate.name)) chosen.push_back(candidate);
  }
  std::stable_partition(chosen.begin(), chosen.end(),
                        [](const InterfaceAddress& a) { return !a.address.IsLoopback(); });
  if (chosen.empty()) {
    const std::string available =
        all.empty() ? "none: no IPv4 interface is up" : DescribeInterfaces(all);
    return absl::FailedPreconditionError(
        absl::StrCat("tcp transport: no usable network interface (WEFT_SOCKET_IFNAME='", spec,
                     "'); this host's IPv4 interfaces that are up: ", available,
                     ". Set WEFT_SOCKET_IFNAME to an interface both hosts share; see `ip addr`"));
  }
  return chosen;
}

std::string DescribeInterfaces(const std::vector<InterfaceAddress>& addresses) {
  std::string text;
  for (const InterfaceAddress& a : addresses) {
    absl::StrAppend(&text, text.empty() ? "" : ", ", a.name, " ", a.address.Ip());
  }
  return text;
}

}  // namespace weft::tcp
