#include "transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace weft::tcp {
namespace {

// Streams ask for 4 MiB buffers: enough for a full window on a 10-25 Gb/s link with ~1 ms RTT.
constexpr int kSocketBufferBytes = 4 << 20;

// Setting SO_SNDBUF/SO_RCVBUF switches off Linux's buffer autotuning and is silently capped at
// net.core.[rw]mem_max, so a fixed size only helps where the cap lets it exceed what autotuning
// would reach; elsewhere the kernel's own tuning is the better choice.
bool SystemAllows(const char* path) {
  std::ifstream in(path);
  long long max = 0;
  return static_cast<bool>(in >> max) && max >= kSocketBufferBytes;
}

bool LargeBuffersAllowed() {
  static const bool allowed =
      SystemAllows("/proc/sys/net/core/wmem_max") && SystemAllows("/proc/sys/net/core/rmem_max");
  return allowed;
}

}  // namespace

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view ip, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is out of range"));
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  const std::string text(ip);
  if (inet_pton(AF_INET, text.c_str(), &sin.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv4 address"));
  }
  return SocketAddress(sin);
}

std::string SocketAddress::Ip() const {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sin_.sin_addr, text, sizeof(text));
  return text;
}

std::string SocketAddress::ToString() const { return absl::StrCat(Ip(), ":", port()); }

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message, which may or may not live in `buf`.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return absl::StrCat(text, " (errno ", err, ")");
}

int ApplyStreamOptions(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) return errno;
  if (LargeBuffersAllowed()) {
    const int bytes = kSocketBufferBytes;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) != 0) {
      return errno;
    }
  }
  return 0;
}

absl::StatusOr<ScopedFd> OpenListener(int* port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrCat("socket(): ", ErrnoText(errno)));
  }
  // Accepted sockets inherit the listener's options, including the buffer sizes.
  if (const int err = ApplyStreamOptions(fd.get()); err != 0) {
    return absl::UnavailableError(absl::StrCat("setsockopt() on the listener: ", ErrnoText(err)));
  }
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = 0;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind(0.0.0.0:0): ", ErrnoText(errno)));
  }
  if (listen(fd.get(), SOMAXCONN) != 0) {
    return absl::UnavailableError(absl::StrCat("listen(): ", ErrnoText(errno)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return absl::UnavailableError(absl::StrCat("getsockname(): ", ErrnoText(errno)));
  }
  *port = ntohs(bound.sin_port);
  return fd;
}

int StartConnect(const SocketAddress& to, ScopedFd* fd) {
  ScopedFd sock(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return errno;
  if (const int err = ApplyStreamOptions(sock.get()); err != 0) return err;
  const sockaddr_in& sin = to.sockaddr();
  if (connect(sock.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) != 0 &&
      errno != EINPROGRESS) {
    return errno;
  }
  *fd = std::move(sock);
  return 0;
}

int FinishConnect(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

std::string PeerAddressOf(int fd) {
  sockaddr_in sin{};
  socklen_t len = sizeof(sin);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0 || sin.sin_family != AF_INET) {
    return "?";
  }
  return SocketAddress(sin).ToString();
}

}  // namespace weft::tcp
