#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/tcp_store_wire.h"

namespace weft {
namespace {

// How long the server keeps a connection it has refused, so the peer can read why before the
// close (closing with unread input would reset the connection and lose the reply).
constexpr auto kLingerAfterError = std::chrono::seconds(1);
// Accepting stops this long when the process is out of descriptors, instead of spinning on a
// listening socket that stays readable.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr int kAcceptsPerRound = 64;
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxReadChunk = 1 << 20;

using Clock = std::chrono::steady_clock;

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
  bool HasFrame() const {
    return in.size() >= 4 && in.size() - 4 >= tcp_store_wire::LoadU32(in.data());
  }
  bool HasWake() const {
    return authenticated && in.size() >= 5 && tcp_store_wire::LoadU32(in.data()) == 1 &&
           in[4] == 'W';
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
    tcp_store_wire::SetNoDelay(fd);
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
    const uint32_t length = tcp_store_wire::LoadU32(c.in.data());
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
  const uint32_t version = tcp_store_wire::LoadU32(body.data() + 1);
  if (version != tcp_store_wire::kProtocolVersion) {
    std::string reply = "V";
    tcp_store_wire::PutU32(&reply, tcp_store_wire::kProtocolVersion);
    return EndWith(c, reply);
  }
  if (!TokensEqual(body.substr(5), token_)) return Refuse(c, "wrong token");
  c.authenticated = true;
  Reply(c, "O");
}

void ServeLoop::HandleSet(Connection& c, absl::string_view body) {
  if (body.size() < 5) return Refuse(c, "truncated set");
  const uint32_t key_size = tcp_store_wire::LoadU32(body.data() + 1);
  if (key_size > body.size() - 5) return Refuse(c, "set: key length beyond the frame");
  std::string key(body.substr(5, key_size));
  auto value = std::make_shared<const std::string>(body.substr(5 + key_size));
  data_[key] = value;
  Reply(c, "O");
  Deliver(key, value);
}

void ServeLoop::HandleGet(Connection& c, absl::string_view body) {
  if (body.size() < 5) return Refuse(c, "truncated get");
  const uint32_t wait_ms =
      std::min<uint32_t>(tcp_store_wire::LoadU32(body.data() + 1), kStoreMaxGetWaitMs);
  std::string key(body.substr(5));
  if (auto it = data_.find(key); it != data_.end()) return ReplyValue(c, it->second);
  if (wait_ms == 0) return Reply(c, "T");
  c.parked = true;
  c.parked_key = std::move(key);
  c.parked_until = Clock::now() + std::chrono::milliseconds(wait_ms);
}

void ServeLoop::HandleAdd(Connection& c, absl::string_view body) {
  if (body.size() < 9) return Refuse(c, "truncated add");
  const auto delta = static_cast<int64_t>(tcp_store_wire::LoadU64(body.data() + 1));
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
  tcp_store_wire::PutU64(&reply, static_cast<uint64_t>(sum));
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
    const size_t end = 4 + size_t{tcp_store_wire::LoadU32(c.in.data())};
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
  if (c.in.size() >= 4 && tcp_store_wire::LoadU32(c.in.data()) > c.FrameCap()) {
    const uint32_t length = tcp_store_wire::LoadU32(c.in.data());
    c.in.clear();
    Refuse(c, absl::StrCat("frame of ", length, " bytes exceeds the limit of ", c.FrameCap()));
  }
}

void ServeLoop::Reply(Connection& c, absl::string_view body) {
  auto frame = std::make_shared<std::string>();
  frame->reserve(4 + body.size());
  tcp_store_wire::PutU32(frame.get(), static_cast<uint32_t>(body.size()));
  frame->append(body.data(), body.size());
  c.out.push_back({std::move(frame), 0});
  Flush(c);
}

void ServeLoop::ReplyValue(Connection& c, const std::shared_ptr<const std::string>& value) {
  auto header = std::make_shared<std::string>();
  tcp_store_wire::PutU32(header.get(), static_cast<uint32_t>(1 + value->size()));
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

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port, std::string token) {
  const std::string where = tcp_store_wire::HostPort(host.empty() ? "0.0.0.0" : host, port);
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
                     rc == EAI_SYSTEM ? tcp_store_wire::ErrnoText(errno) : gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  int listen_fd = -1;
  std::string last_error = "no address to listen on";
  for (const addrinfo* a = found; a != nullptr && listen_fd < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = absl::StrCat("socket: ", tcp_store_wire::ErrnoText(errno));
      continue;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int err = errno;
      last_error = absl::StrCat("bind: ", tcp_store_wire::ErrnoText(err));
      if (err == EADDRINUSE) {
        absl::StrAppend(&last_error,
                        " (another process holds the port; pick a free one with "
                        "WEFT_PORT or MASTER_PORT)");
      }
      close(fd);
      continue;
    }
    if (listen(fd, SOMAXCONN) != 0) {
      last_error = absl::StrCat("listen: ", tcp_store_wire::ErrnoText(errno));
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
    return absl::InternalError(
        absl::StrCat("store at ", where, ": getsockname: ", tcp_store_wire::ErrnoText(err)));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int err = errno;
    close(listen_fd);
    return absl::InternalError(
        absl::StrCat("store at ", where, ": eventfd: ", tcp_store_wire::ErrnoText(err)));
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

}  // namespace weft
