#include "bootstrap/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace weft {
namespace {

constexpr uint32_t kProtocolVersion = 1;
// How long the server keeps a connection it has refused, so the peer can read why before the
// close (closing with unread input would reset the connection and lose the reply).
constexpr auto kLingerAfterError = std::chrono::seconds(1);
// Accepting stops this long when the process is out of descriptors, instead of spinning on a
// listening socket that stays readable.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr int kAcceptsPerRound = 64;
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxReadChunk = 1 << 20;
// The client re-checks the caller's deadline and abort flag this often while it waits on I/O.
constexpr absl::Duration kClientPollSlice = absl::Milliseconds(50);
// After the server-side wait of a Get, a healthy store answers at once; past this grace, a caller
// whose deadline is over stops waiting for a store that does not.
constexpr absl::Duration kLateGrace = absl::Seconds(1);
constexpr int kMaxConnectRetryMs = 100;

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int err) {
  char buffer[128];
  return strerror_r(err, buffer, sizeof(buffer));  // GNU flavour: returns the text
}

std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// Runs over all of `want` whatever `got` holds, so the time taken does not reveal how long a
// prefix of the secret a guess got right.
bool TokensEqual(absl::string_view got, absl::string_view want) {
  unsigned char diff = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    const unsigned char g = i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(want[i]);
  }
  return diff == 0;
}

void SetNoDelay(int fd) {
  int one = 1;
  // Only latency depends on it; a socket that refuses still works.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---------------------------------------------------------------------------------------------
// Server

struct Connection {
  struct Chunk {
    std::shared_ptr<const std::string> bytes;
    size_t sent = 0;
  };

  int fd = -1;
  bool authenticated = false;
  bool closing = false;  // refused: flush the reply, drain input, then close
  bool write_shut = false;
  bool closed = false;
  Clock::time_point expiry;  // end of the handshake, or of the linger when closing
  std::string in;            // at most one frame plus one read
  std::deque<Chunk> out;     // replies share stored values instead of copying them
  bool parked = false;       // a Get waits for its key
  std::string parked_key;
  Clock::time_point parked_until;

  uint32_t FrameCap() const { return authenticated ? kMaxFrameBytes : kStoreMaxHelloBytes; }
  bool HasFrame() const { return in.size() >= 4 && in.size() - 4 >= LoadU32(in.data()); }
  bool HasWake() const {
    return authenticated && in.size() >= 5 && LoadU32(in.data()) == 1 && in[4] == 'W';
  }
  // Whether the next frame may be handled now. Requests are answered strictly one at a time,
  // which also makes a client that never reads its replies stop being read; a wake is taken
  // even while a Get is parked, since ending that Get is its purpose.
  bool CanAdvance() const {
    return !closed && !closing && HasFrame() && ((!parked && out.empty()) || HasWake());
  }
};

class ServeLoop {
 public:
  ServeLoop(int listen_fd, int wake_fd, absl::string_view token)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), token_(token) {}
  ~ServeLoop() {
    for (auto& c : connections_) {
      if (!c->closed) close(c->fd);
    }
  }

  void Run();

 private:
  void Accept(Clock::time_point now);
  void Expire(Connection& c, Clock::time_point now);
  void Advance(Connection& c);
  void Handle(Connection& c, absl::string_view body);
  void HandleHello(Connection& c, absl::string_view body);
  void HandleSet(Connection& c, absl::string_view body);
  void HandleGet(Connection& c, absl::string_view body);
  void HandleAdd(Connection& c, absl::string_view body);
  void Deliver(const std::string& key, const std::shared_ptr<const std::string>& value);
  void Read(Connection& c);
  void Reply(Connection& c, absl::string_view body);
  void ReplyValue(Connection& c, const std::shared_ptr<const std::string>& value);
  // Answers `reply`, then closes the connection once the peer has had it.
  void EndWith(Connection& c, absl::string_view reply);
  void Refuse(Connection& c, absl::string_view message) { EndWith(c, absl::StrCat("E", message)); }
  void Flush(Connection& c);
  void Close(Connection& c);

  const int listen_fd_;
  const int wake_fd_;
  const absl::string_view token_;
  Clock::time_point accept_paused_until_{};
  std::unordered_map<std::string, std::shared_ptr<const std::string>> data_;
  std::vector<std::unique_ptr<Connection>> connections_;
  char scratch_[kReadChunk];
};

void ServeLoop::Run() {
  std::vector<pollfd> fds;
  while (true) {
    Clock::time_point now = Clock::now();
    for (auto& c : connections_) Expire(*c, now);
    for (size_t i = 0; i < connections_.size(); ++i) Advance(*connections_[i]);
    std::erase_if(connections_, [](const std::unique_ptr<Connection>& c) { return c->closed; });

    // Sleep until the next timer, or not at all when a buffered request can be handled.
    Clock::time_point wake_at = Clock::time_point::max();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    if (!accepting) wake_at = accept_paused_until_;
    for (auto& c : connections_) {
      short events = c->out.empty() ? 0 : POLLOUT;
      if (c->closing || !c->HasFrame()) events |= POLLIN;
      fds.push_back({c->fd, events, 0});
      if (!c->authenticated || c->closing) wake_at = std::min(wake_at, c->expiry);
      if (c->parked) wake_at = std::min(wake_at, c->parked_until);
      if (c->CanAdvance()) wake_at = now;
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, kStoreMaxGetWaitMs));
    }
    const size_t polled = connections_.size();
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno != EINTR) poll(nullptr, 0, 10);  // ENOMEM: let the system recover, then retry
      continue;
    }
    if (fds[0].revents != 0) return;
    now = Clock::now();
    if (fds[1].revents != 0) Accept(now);
    for (size_t i = 0; i < polled; ++i) {
      Connection& c = *connections_[i];
      const short revents = fds[i + 2].revents;
      if (revents & (POLLIN | POLLERR | POLLHUP)) Read(c);
      if (!c.closed && (revents & POLLOUT)) Flush(c);
    }
  }
}

void ServeLoop::Accept(Clock::time_point now) {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) accept_paused_until_ = now + kAcceptPause;
      return;
    }
    SetNoDelay(fd);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->expiry = now + std::chrono::milliseconds(absl::ToInt64Milliseconds(kStoreHandshakeTimeout));
    connections_.push_back(std::move(c));
  }
}

void ServeLoop::Expire(Connection& c, Clock::time_point now) {
  if (c.closed) return;
  if ((!c.authenticated || c.closing) && now >= c.expiry) {
    Close(c);
    return;
  }
  if (c.parked && now >= c.parked_until) {
    c.parked = false;
    Reply(c, "T");
  }
}

void ServeLoop::Advance(Connection& c) {
  while (c.CanAdvance()) {
    if (c.HasWake()) {
      c.in.erase(0, 5);
      if (c.parked) {
        c.parked = false;
        Reply(c, "T");
      }
      continue;
    }
    const uint32_t length = LoadU32(c.in.data());
    Handle(c, absl::string_view(c.in.data() + 4, length));
    if (c.closed || c.closing) {
      c.in.clear();
      return;
    }
    c.in.erase(0, 4 + size_t{length});
  }
  if (!c.closed) Flush(c);
}

void ServeLoop::Handle(Connection& c, absl::string_view body) {
  if (body.empty()) return Refuse(c, "empty frame");
  const char command = body[0];
  if (!c.authenticated) {
    if (command != 'H') return Refuse(c, "the first frame must be a hello");
    return HandleHello(c, body);
  }
  switch (command) {
    case 'S':
      return HandleSet(c, body);
    case 'G':
      return HandleGet(c, body);
    case 'A':
      return HandleAdd(c, body);
    case 'H':
      return Refuse(c, "repeated hello");
    default:
      return Refuse(c,
                    absl::StrFormat("unknown command 0x%02x", static_cast<unsigned char>(command)));
  }
}

void ServeLoop::HandleHello(Connection& c, absl::string_view body) {
  if (body.size() < 5) return Refuse(c, "truncated hello");
  const uint32_t version = LoadU32(body.data() + 1);
  if (version != kProtocolVersion) {
    std::string reply = "V";
    PutU32(&reply, kProtocolVersion);
    return EndWith(c, reply);
  }
  if (!TokensEqual(body.substr(5), token_)) return Refuse(c, "wrong token");
  c.authenticated = true;
  Reply(c, "O");
}

void ServeLoop::HandleSet(Connection& c, absl::string_view body) {
  if (body.size() < 5) return Refuse(c, "truncated set");
  const uint32_t key_size = LoadU32(body.data() + 1);
  if (key_size > body.size() - 5) return Refuse(c, "set: key length beyond the frame");
  std::string key(body.substr(5, key_size));
  auto value = std::make_shared<const std::string>(body.substr(5 + key_size));
  data_[key] = value;
  Reply(c, "O");
  Deliver(key, value);
}

void ServeLoop::HandleGet(Connection& c, absl::string_view body) {
  if (body.size() < 5) return Refuse(c, "truncated get");
  const uint32_t wait_ms = std::min<uint32_t>(LoadU32(body.data() + 1), kStoreMaxGetWaitMs);
  std::string key(body.substr(5));
  if (auto it = data_.find(key); it != data_.end()) return ReplyValue(c, it->second);
  if (wait_ms == 0) return Reply(c, "T");
  c.parked = true;
  c.parked_key = std::move(key);
  c.parked_until = Clock::now() + std::chrono::milliseconds(wait_ms);
}

void ServeLoop::HandleAdd(Connection& c, absl::string_view body) {
  if (body.size() < 9) return Refuse(c, "truncated add");
  const auto delta = static_cast<int64_t>(LoadU64(body.data() + 1));
  std::string key(body.substr(9));
  int64_t current = 0;
  if (auto it = data_.find(key); it != data_.end() && !absl::SimpleAtoi(*it->second, &current)) {
    // A bad add is the caller's mistake, not a broken stream: the connection stays open.
    return Reply(c, absl::StrCat("Ekey '", key, "' holds a value of ", it->second->size(),
                                 " bytes that is not an integer"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return Reply(c, absl::StrCat("Eadding ", delta, " to key '", key, "' (", current,
                                 ") overflows 64 bits"));
  }
  auto value = std::make_shared<const std::string>(absl::StrCat(sum));
  data_[key] = value;
  std::string reply = "O";
  PutU64(&reply, static_cast<uint64_t>(sum));
  Reply(c, reply);
  Deliver(key, value);
}

void ServeLoop::Deliver(const std::string& key, const std::shared_ptr<const std::string>& value) {
  for (auto& other : connections_) {
    if (other->closed || !other->parked || other->parked_key != key) continue;
    other->parked = false;
    ReplyValue(*other, value);
  }
}

void ServeLoop::Read(Connection& c) {
  if (c.closing) {
    // Discard what a refused peer still sends until it closes or the linger ends.
    const ssize_t n = recv(c.fd, scratch_, sizeof(scratch_), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) Close(c);
    return;
  }
  // Read the rest of the current frame in one go where possible, but never more than a bounded
  // step beyond the bytes that have arrived.
  size_t want = kReadChunk;
  if (c.in.size() >= 4) {
    const size_t end = 4 + size_t{LoadU32(c.in.data())};
    if (end > c.in.size()) want = std::clamp(end - c.in.size(), kReadChunk, kMaxReadChunk);
  }
  const size_t old_size = c.in.size();
  c.in.resize(old_size + want);
  const ssize_t n = recv(c.fd, c.in.data() + old_size, want, MSG_DONTWAIT);
  c.in.resize(old_size + static_cast<size_t>(std::max<ssize_t>(n, 0)));
  if (n == 0) return Close(c);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) Close(c);
    return;
  }
  if (c.in.size() >= 4 && LoadU32(c.in.data()) > c.FrameCap()) {
    const uint32_t length = LoadU32(c.in.data());
    c.in.clear();
    Refuse(c, absl::StrCat("frame of ", length, " bytes exceeds the limit of ", c.FrameCap()));
  }
}

void ServeLoop::Reply(Connection& c, absl::string_view body) {
  auto frame = std::make_shared<std::string>();
  frame->reserve(4 + body.size());
  PutU32(frame.get(), static_cast<uint32_t>(body.size()));
  frame->append(body.data(), body.size());
  c.out.push_back({std::move(frame), 0});
  Flush(c);
}

void ServeLoop::ReplyValue(Connection& c, const std::shared_ptr<const std::string>& value) {
  auto header = std::make_shared<std::string>();
  PutU32(header.get(), static_cast<uint32_t>(1 + value->size()));
  header->push_back('O');
  c.out.push_back({std::move(header), 0});
  c.out.push_back({value, 0});
  Flush(c);
}

void ServeLoop::EndWith(Connection& c, absl::string_view reply) {
  c.closing = true;
  c.parked = false;
  c.expiry = Clock::now() + kLingerAfterError;
  Reply(c, reply);  // flushes, then shuts the write side
}

void ServeLoop::Flush(Connection& c) {
  while (!c.out.empty()) {
    Connection::Chunk& chunk = c.out.front();
    const ssize_t n = send(c.fd, chunk.bytes->data() + chunk.sent, chunk.bytes->size() - chunk.sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) Close(c);
      return;
    }
    chunk.sent += static_cast<size_t>(n);
    if (chunk.sent == chunk.bytes->size()) c.out.pop_front();
  }
  if (c.closing && !c.write_shut) {
    shutdown(c.fd, SHUT_WR);  // the peer reads the refusal, then end of stream
    c.write_shut = true;
  }
}

void ServeLoop::Close(Connection& c) {
  if (c.closed) return;
  close(c.fd);
  c.closed = true;
  c.parked = false;
  c.out.clear();
}

// ---------------------------------------------------------------------------------------------
// Client helpers

// One attempt to open a TCP connection to host:port. Failures worth retrying (nobody listening
// yet, resolver busy, no route yet) are Unavailable; an attempt cut short by the deadline is
// DeadlineExceeded; others (a name that does not resolve) are final.
absl::StatusOr<int> ConnectOnce(const std::string& host, int port, const std::string& where,
                                const Deadline& deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc == EAI_AGAIN) {
    return absl::UnavailableError(absl::StrCat("resolving '", host, "': ", gai_strerror(rc)));
  }
  if (rc == EAI_SYSTEM) {
    return absl::UnavailableError(absl::StrCat("resolving '", host, "': ", ErrnoText(errno)));
  }
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("store at ", where, ": the host name '", host,
                                                   "' does not resolve (", gai_strerror(rc),
                                                   "); check WEFT_ADDR / MASTER_ADDR"));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  absl::Status last = absl::UnavailableError("no address to try");
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = absl::UnavailableError(absl::StrCat("socket: ", ErrnoText(errno)));
      continue;
    }
    int err = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) err = errno;
    while (err == EINPROGRESS || err == EINTR) {
      if (!deadline.Check("").ok()) {
        close(fd);
        return absl::DeadlineExceededError("connect: no answer before the deadline");
      }
      pollfd p{fd, POLLOUT, 0};
      const int r = poll(
          &p, 1,
          deadline.PollTimeoutMs(static_cast<int>(absl::ToInt64Milliseconds(kClientPollSlice))));
      if (r < 0 && errno != EINTR) {
        err = errno;
      } else if (r > 0) {
        socklen_t size = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &size) != 0) err = errno;
      }
    }
    if (err == 0) {
      SetNoDelay(fd);
      return fd;
    }
    close(fd);
    last = absl::UnavailableError(absl::StrCat("connect: ", ErrnoText(err)));
  }
  return last;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// TcpStoreServer

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port, std::string token) {
  const std::string where = HostPort(host.empty() ? "0.0.0.0" : host, port);
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", where,
                     ": refusing to serve without a token (set WEFT_TOKEN, or check that "
                     "the kernel's random source is readable)"));
  }
  if (token.size() > kStoreMaxHelloBytes - 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", where, ": a token of ", token.size(), " bytes is too long"));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("store: port ", port, " is out of range"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                             &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", where, ": cannot resolve the address to listen on: ",
                     rc == EAI_SYSTEM ? ErrnoText(errno) : gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  int listen_fd = -1;
  std::string last_error = "no address to listen on";
  for (const addrinfo* a = found; a != nullptr && listen_fd < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = absl::StrCat("socket: ", ErrnoText(errno));
      continue;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int err = errno;
      last_error = absl::StrCat("bind: ", ErrnoText(err));
      if (err == EADDRINUSE) {
        absl::StrAppend(&last_error,
                        " (another process holds the port; pick a free one with "
                        "WEFT_PORT or MASTER_PORT)");
      }
      close(fd);
      continue;
    }
    if (listen(fd, SOMAXCONN) != 0) {
      last_error = absl::StrCat("listen: ", ErrnoText(errno));
      close(fd);
      continue;
    }
    listen_fd = fd;
  }
  if (listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("store: cannot listen on ", where, ": ", last_error));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0) {
    const int err = errno;
    close(listen_fd);
    return absl::InternalError(absl::StrCat("store at ", where, ": getsockname: ", ErrnoText(err)));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int err = errno;
    close(listen_fd);
    return absl::InternalError(absl::StrCat("store at ", where, ": eventfd: ", ErrnoText(err)));
  }
  auto server = absl::WrapUnique(new TcpStoreServer());
  server->listen_fd_ = listen_fd;
  server->wake_fd_ = wake_fd;
  server->port_ = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  server->token_ = std::move(token);
  server->thread_ = std::thread(&TcpStoreServer::Serve, server.get());
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    ssize_t n;
    do {
      n = write(wake_fd_, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void TcpStoreServer::Serve() {
  auto loop = std::make_unique<ServeLoop>(listen_fd_, wake_fd_, token_);
  loop->Run();
}

// ---------------------------------------------------------------------------------------------
// TcpStoreClient

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host,
                                                                        int port,
                                                                        const std::string& token,
                                                                        const Deadline& deadline) {
  const std::string where = HostPort(host, port);
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store at ", where, ": no host named; set WEFT_ADDR or MASTER_ADDR to rank 0's address"));
  }
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store at ", where, ": no valid port (1..65535); set WEFT_PORT or MASTER_PORT"));
  }
  if (token.empty() || token.size() > kStoreMaxHelloBytes - 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", where, ": the token must hold 1 to ", kStoreMaxHelloBytes - 5,
                     " bytes, not ", token.size(), "; check WEFT_TOKEN"));
  }
  // Connection attempts are not free (a socket and a handshake each), so retries sleep from the
  // start, doubling up to a cap, rather than spinning as Backoff does.
  int retry_ms = 1;
  int fd = -1;
  absl::Status last;  // the most telling failure so far, for the final message
  while (true) {
    absl::StatusOr<int> attempt = ConnectOnce(host, port, where, deadline);
    if (attempt.ok()) {
      fd = *attempt;
      break;
    }
    if (absl::IsUnavailable(attempt.status()) || last.ok()) last = attempt.status();
    if (!absl::IsUnavailable(attempt.status()) && !absl::IsDeadlineExceeded(attempt.status())) {
      return attempt.status();
    }
    if (absl::Status s = deadline.Check(absl::StrCat("connecting to the store at ", where));
        !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat(s.message(), " (last attempt: ", last.message(),
                                 "); is the process that runs the store (rank 0, or weftrun) up, "
                                 "and do WEFT_ADDR / WEFT_PORT name it?"));
    }
    poll(nullptr, 0, deadline.PollTimeoutMs(retry_ms));
    retry_ms = std::min(retry_ms * 2, kMaxConnectRetryMs);
  }

  auto client = absl::WrapUnique(new TcpStoreClient(fd, where));
  client->host_ = host;
  client->port_ = port;
  client->token_ = token;
  std::string hello = "H";
  PutU32(&hello, kProtocolVersion);
  hello += token;
  const absl::Time now = absl::Now();
  // The caller's deadline is honoured at once; the hello's own bound catches a peer on that port
  // that accepts but never answers (not a Weft store).
  const Bound bound{now + kStoreHandshakeTimeout, now, &deadline};
  const std::string what = absl::StrCat("store at ", where, ": hello");
  absl::StatusOr<std::string> reply = client->Roundtrip(hello, bound, what);
  if (!reply.ok()) return reply.status();
  if (*reply == "O") return client;
  if ((*reply)[0] == 'E') {
    return absl::PermissionDeniedError(
        absl::StrCat("store at ", where, " rejected this process's token: ", reply->substr(1),
                     "; check WEFT_TOKEN (every rank of a job must use the same token)"));
  }
  if ((*reply)[0] == 'V' && reply->size() == 5) {
    return absl::FailedPreconditionError(
        absl::StrCat("store at ", where, " speaks store protocol version ",
                     LoadU32(reply->data() + 1), ", this process version ", kProtocolVersion,
                     ": every rank of a job must run the same Weft release"));
  }
  return client->BadReply(*reply, what);
}

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::ConnectAgain(
    const Deadline& deadline) const {
  return Connect(host_, port_, token_, deadline);
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

TcpStoreClient::Turn::Turn(TcpStoreClient& client) : client_(client) {
  std::unique_lock<std::mutex> lock(client_.mu_);
  const uint64_t ticket = client_.next_ticket_++;
  if (client_.parked_) client_.WakeParkedGet();
  client_.turn_done_.wait(lock, [&] { return client_.serving_ == ticket; });
}

TcpStoreClient::Turn::~Turn() {
  {
    std::lock_guard<std::mutex> lock(client_.mu_);
    ++client_.serving_;
  }
  client_.turn_done_.notify_all();
}

absl::Status TcpStoreClient::Set(absl::string_view key, absl::string_view value) {
  const std::string what = absl::StrCat("store at ", where_, ": set of key '", key, "'");
  const size_t size = 5 + key.size() + value.size();
  if (size > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", size, " bytes exceed the store's frame limit of ", kMaxFrameBytes));
  }
  std::string body = "S";
  body.reserve(size);
  PutU32(&body, static_cast<uint32_t>(key.size()));
  absl::StrAppend(&body, key, value);
  Turn turn(*this);
  const absl::Time now = absl::Now();
  absl::StatusOr<std::string> reply =
      Roundtrip(body, Bound{now + kStoreRequestTimeout, now + kStoreRequestTimeout}, what);
  if (!reply.ok()) return reply.status();
  if (*reply == "O") return absl::OkStatus();
  return BadReply(*reply, what);
}

absl::StatusOr<std::string> TcpStoreClient::Get(absl::string_view key, const Deadline& deadline) {
  const std::string what = absl::StrCat("store at ", where_, ": waiting for key '", key, "'");
  if (5 + key.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the key is too long"));
  }
  if (deadline.Aborted()) return deadline.Check(what);
  while (true) {
    // An expired deadline still gets one immediate look, so a present key is always returned.
    {
      Turn turn(*this);
      const int wait_ms = deadline.PollTimeoutMs(kStoreGetRoundMs);
      std::string body = "G";
      PutU32(&body, static_cast<uint32_t>(wait_ms));
      absl::StrAppend(&body, key);
      const absl::Time answer_due = absl::Now() + absl::Milliseconds(wait_ms);
      absl::StatusOr<std::string> reply = Roundtrip(
          body, Bound{answer_due + kStoreRequestTimeout, answer_due + kLateGrace, &deadline}, what,
          /*wakeable=*/wait_ms > 0);
      if (!reply.ok()) return reply.status();
      if (!reply->empty() && (*reply)[0] == 'O') return reply->substr(1);
      if (*reply != "T") return BadReply(*reply, what);
    }
    if (absl::Status s = deadline.Check(what); !s.ok()) return s;
  }
}

absl::StatusOr<int64_t> TcpStoreClient::Add(absl::string_view key, int64_t delta) {
  const std::string what =
      absl::StrCat("store at ", where_, ": add ", delta, " to key '", key, "'");
  if (9 + key.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the key is too long"));
  }
  std::string body = "A";
  PutU64(&body, static_cast<uint64_t>(delta));
  absl::StrAppend(&body, key);
  Turn turn(*this);
  const absl::Time now = absl::Now();
  absl::StatusOr<std::string> reply =
      Roundtrip(body, Bound{now + kStoreRequestTimeout, now + kStoreRequestTimeout}, what);
  if (!reply.ok()) return reply.status();
  if (reply->size() == 9 && (*reply)[0] == 'O') {
    return static_cast<int64_t>(LoadU64(reply->data() + 1));
  }
  if ((*reply)[0] == 'E') {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", reply->substr(1)));
  }
  return BadReply(*reply, what);
}

absl::StatusOr<std::string> TcpStoreClient::Roundtrip(absl::string_view body, const Bound& bound,
                                                      absl::string_view what, bool wakeable) {
  if (fd_ < 0) return broken_;
  std::string frame;
  {
    std::lock_guard<std::mutex> lock(mu_);
    frame = std::move(unsent_wake_);  // what a waker could not send finishes first
    unsent_wake_.clear();
  }
  PutU32(&frame, static_cast<uint32_t>(body.size()));
  frame.append(body.data(), body.size());
  absl::Status status = SendAll(frame, bound, what);
  if (status.ok() && wakeable) {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = true;
    woken_ = false;
    if (next_ticket_ > serving_ + 1) WakeParkedGet();  // someone queued while we were sending
  }
  std::string reply;
  if (status.ok()) {
    char header[4];
    status = RecvAll(header, sizeof(header), bound, what);
    const uint32_t length = status.ok() ? LoadU32(header) : 0;
    if (status.ok() && (length == 0 || length > kMaxFrameBytes)) {
      status = absl::DataLossError(
          absl::StrCat(what, ": the reply claims ", length, " bytes: is this port a Weft store?"));
    }
    if (status.ok()) {
      reply.resize(length);
      status = RecvAll(reply.data(), length, bound, what);
    }
  }
  if (wakeable) {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = false;  // before Break may close fd_: wakers only write while this is set
  }
  if (!status.ok()) {
    Break(status);
    return status;
  }
  return reply;
}

void TcpStoreClient::WakeParkedGet() {
  if (woken_) return;
  woken_ = true;
  // The Get's owner only reads until it clears parked_, so this thread is the only writer. A
  // wake the socket cannot take whole is finished by the next request; one it cannot take at all
  // is dropped, and the Get then ends with its round.
  static constexpr char kWake[] = {1, 0, 0, 0, 'W'};
  const ssize_t n = send(fd_, kWake, sizeof(kWake), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0 && n < static_cast<ssize_t>(sizeof(kWake))) unsent_wake_.assign(kWake + n, kWake + 5);
}

absl::Status TcpStoreClient::SendAll(absl::string_view bytes, const Bound& bound,
                                     absl::string_view what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": send: ", ErrnoText(errno),
                                                 " (has the process running the store exited?)"));
    }
    if (absl::Status s = AwaitFd(POLLOUT, bound, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TcpStoreClient::RecvAll(char* data, size_t size, const Bound& bound,
                                     absl::string_view what) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = recv(fd_, data + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(
          what, ": the store closed the connection (has the process running it exited?)"));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": recv: ", ErrnoText(errno)));
    }
    if (absl::Status s = AwaitFd(POLLIN, bound, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TcpStoreClient::AwaitFd(short events, const Bound& bound, absl::string_view what) {
  while (true) {
    const absl::Time now = absl::Now();
    if (bound.caller != nullptr && now >= bound.soft &&
        (bound.caller->Aborted() || bound.caller->Expired())) {
      return bound.caller->Check(what);
    }
    if (now >= bound.hard) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": the store did not answer in time (is it overloaded or stopped?)"));
    }
    absl::Duration wait = bound.hard - now;
    if (bound.caller != nullptr) wait = std::min(wait, kClientPollSlice);
    pollfd p{fd_, events, 0};
    const int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait)) + 1);
    if (r > 0) return absl::OkStatus();  // ready, or an error the next send/recv reports
    if (r < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", ErrnoText(errno)));
    }
  }
}

absl::Status TcpStoreClient::BadReply(absl::string_view reply, absl::string_view what) {
  absl::Status status =
      !reply.empty() && reply[0] == 'E'
          ? absl::InternalError(
                absl::StrCat(what, ": the store refused the request: ", reply.substr(1)))
          : absl::DataLossError(absl::StrCat(what, ": unexpected reply of ", reply.size(),
                                             " bytes: is this port a Weft store?"));
  // The store closes the connection after refusing a request it could not parse.
  Break(status);
  return status;
}

void TcpStoreClient::Break(const absl::Status& cause) {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
  broken_ = absl::UnavailableError(absl::StrCat("store at ", where_,
                                                ": the connection was closed after an earlier "
                                                "failure: ",
                                                cause.message()));
}

}  // namespace weft
