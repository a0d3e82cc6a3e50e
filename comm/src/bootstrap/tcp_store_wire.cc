#include "bootstrap/tcp_store_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace weft::tcp_store_wire {

std::string ErrnoText(int err) {
  char buffer[128];
  return strerror_r(err, buffer, sizeof(buffer));  // GNU flavour: returns the text
}

std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

void SetNoDelay(int fd) {
  int one = 1;
  // Only latency depends on it; a socket that refuses still works.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace weft::tcp_store_wire
