// Socket primitives of the TCP transport: owned descriptors, IPv4 endpoints, and the socket
// options every stream gets.
//
// Everything here is non-blocking and reports failures as absl::Status values (or raw errno
// values where the caller decides what a failure means, e.g. "try the next address").
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::tcp {

// A file descriptor closed when the owner goes away.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 address and port.
class SocketAddress {
 public:
  SocketAddress() = default;
  explicit SocketAddress(const sockaddr_in& sin) : sin_(sin) {}

  // "a.b.c.d" and a port; fails on anything that is not a dotted-quad IPv4 address.
  static absl::StatusOr<SocketAddress> Parse(absl::string_view ip, int port);

  const sockaddr_in& sockaddr() const { return sin_; }
  int port() const { return ntohs(sin_.sin_port); }
  void set_port(int port) { sin_.sin_port = htons(static_cast<uint16_t>(port)); }
  bool IsLoopback() const { return (ntohl(sin_.sin_addr.s_addr) >> 24) == 127; }

  std::string Ip() const;        // "192.0.2.2"
  std::string ToString() const;  // "192.0.2.2:41234"

 private:
  sockaddr_in sin_{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {}, .sin_zero = {}};
};

// "Connection refused (errno 111)": strerror text with the number, for error messages.
std::string ErrnoText(int err);

// Sets TCP_NODELAY and, where the system allows large ones, the send and receive buffer sizes.
// Called before connect() / listen() because the window scale is fixed by the SYN exchange.
// Returns 0 or the errno of the failed setsockopt().
int ApplyStreamOptions(int fd);

// A non-blocking IPv4 listener on all interfaces and an ephemeral port; `port` receives the port.
absl::StatusOr<ScopedFd> OpenListener(int* port);

// Starts a non-blocking connect to `to`. On success `fd` holds the socket (connected or still
// connecting) and 0 is returned; otherwise the errno of the failure.
int StartConnect(const SocketAddress& to, ScopedFd* fd);

// After a non-blocking connect became writable: 0 when connected, else the errno (SO_ERROR).
int FinishConnect(int fd);

// The peer address of a connected socket, e.g. "192.0.2.7:51234" ("?" if unknown).
std::string PeerAddressOf(int fd);

}  // namespace weft::tcp
