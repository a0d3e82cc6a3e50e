#include "reachability.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace weft::info {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Errno(absl::string_view what, int err) {
  return absl::StrCat(what, ": ", std::strerror(err), " (errno ", err, ")");
}

// A non-blocking connect bounded by `timeout`; 0 or the errno.
int ConnectWithin(int fd, const sockaddr_in& to, absl::Duration timeout) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd pfd{fd, POLLOUT, 0};
  const int ready = poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

std::string AddressText(const sockaddr_in& sin) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
  return absl::StrCat(ip, ":", ntohs(sin.sin_port));
}

}  // namespace

absl::Status CheckLocalAddress(const std::string& ip, absl::Duration timeout) {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip.c_str(), &at.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IPv4 address"));
  }
  Fd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return absl::InternalError(Errno("socket", errno));
  socklen_t len = sizeof(at);
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0 ||
      listen(listener.get(), 1) != 0 ||
      getsockname(listener.get(), reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    return absl::UnavailableError(Errno(absl::StrCat("listening on ", ip), errno));
  }
  Fd client(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (client.get() < 0) return absl::InternalError(Errno("socket", errno));
  if (const int err = ConnectWithin(client.get(), at, timeout); err != 0) {
    return absl::UnavailableError(Errno(absl::StrCat("connecting to ", AddressText(at)), err));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckPeer(const std::string& host, int port, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_in to = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  to.sin_port = htons(static_cast<uint16_t>(port));
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(Errno("socket", errno));
  if (const int err = ConnectWithin(fd.get(), to, timeout); err != 0) {
    return absl::UnavailableError(Errno(absl::StrCat("connecting to ", AddressText(to)), err));
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  return AddressText(local);
}

}  // namespace weft::info
