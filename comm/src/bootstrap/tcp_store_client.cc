#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/tcp_store_wire.h"

namespace weft {
namespace {

// The client re-checks the caller's deadline and abort flag this often while it waits on I/O.
constexpr absl::Duration kClientPollSlice = absl::Milliseconds(50);
// After the server-side wait of a Get, a healthy store answers at once; past this grace, a caller
// whose deadline is over stops waiting for a store that does not.
constexpr absl::Duration kLateGrace = absl::Seconds(1);
constexpr int kMaxConnectRetryMs = 100;

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
    return absl::UnavailableError(
        absl::StrCat("resolving '", host, "': ", tcp_store_wire::ErrnoText(errno)));
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
      last = absl::UnavailableError(absl::StrCat("socket: ", tcp_store_wire::ErrnoText(errno)));
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
      tcp_store_wire::SetNoDelay(fd);
      return fd;
    }
    close(fd);
    last = absl::UnavailableError(absl::StrCat("connect: ", tcp_store_wire::ErrnoText(err)));
  }
  return last;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host,
                                                                        int port,
                                                                        const std::string& token,
                                                                        const Deadline& deadline) {
  const std::string where = tcp_store_wire::HostPort(host, port);
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
  tcp_store_wire::PutU32(&hello, tcp_store_wire::kProtocolVersion);
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
    return absl::FailedPreconditionError(absl::StrCat(
        "store at ", where, " speaks store protocol version ",
        tcp_store_wire::LoadU32(reply->data() + 1), ", this process version ",
        tcp_store_wire::kProtocolVersion, ": every rank of a job must run the same Weft release"));
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
  tcp_store_wire::PutU32(&body, static_cast<uint32_t>(key.size()));
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
      tcp_store_wire::PutU32(&body, static_cast<uint32_t>(wait_ms));
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
  tcp_store_wire::PutU64(&body, static_cast<uint64_t>(delta));
  absl::StrAppend(&body, key);
  Turn turn(*this);
  const absl::Time now = absl::Now();
  absl::StatusOr<std::string> reply =
      Roundtrip(body, Bound{now + kStoreRequestTimeout, now + kStoreRequestTimeout}, what);
  if (!reply.ok()) return reply.status();
  if (reply->size() == 9 && (*reply)[0] == 'O') {
    return static_cast<int64_t>(tcp_store_wire::LoadU64(reply->data() + 1));
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
  tcp_store_wire::PutU32(&frame, static_cast<uint32_t>(body.size()));
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
    const uint32_t length = status.ok() ? tcp_store_wire::LoadU32(header) : 0;
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
      return absl::UnavailableError(absl::StrCat(what, ": send: ", tcp_store_wire::ErrnoText(errno),
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
      return absl::UnavailableError(
          absl::StrCat(what, ": recv: ", tcp_store_wire::ErrnoText(errno)));
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
      return absl::UnavailableError(
          absl::StrCat(what, ": poll: ", tcp_store_wire::ErrnoText(errno)));
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
