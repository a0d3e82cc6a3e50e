#include "transport/tcp/mesh_connector.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "log.h"
#include "transport/tcp/handshake.h"

namespace weft::tcp {
namespace {

// How long one address may take to accept the TCP connection before the next is tried. Peers
// answer within milliseconds when an address works; a silent one is firewalled or unroutable.
constexpr absl::Duration kAttemptTimeout = absl::Seconds(2);
// How long an accepted connection may take to send its hello before it is dropped.
constexpr absl::Duration kHelloTimeout = absl::Seconds(5);
// poll() wakes at least this often to notice attempt timeouts and the deadline.
constexpr int kPollCapMs = 50;
// How long the listener rests after accept() ran out of descriptors or memory.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(20);

constexpr absl::string_view kHint =
    "Set WEFT_SOCKET_IFNAME to an interface both hosts share; see `ip addr`";

// Compares without an early exit, so response times do not reveal how much of a guess was right.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

class MeshConnector {
 public:
  MeshConnector(const MeshPlan& plan, int listen_fd, const Deadline& deadline);
  absl::StatusOr<std::vector<PeerStreams>> Run();

 private:
  // A higher peer, which this rank connects to.
  struct Target {
    int peer = 0;
    std::vector<InterfaceAddress> addresses;  // the usable ones, in the peer's order
    std::vector<std::string> tried;           // one entry per failed or skipped address
    int chosen = -1;                          // index into addresses, once stream 0 is accepted
    std::vector<ScopedFd> streams;
    int connected = 0;
  };
  // A lower peer, which connects to this rank.
  struct Source {
    int peer = 0;
    int nstreams = 0;  // 0 until its first acceptable hello announces the count
    std::vector<ScopedFd> streams;
    std::vector<bool> reserved;  // a hello for the stream was accepted; its ack is on the way
    int accepted = 0;
    std::string address;
  };
  struct Outgoing {
    enum class Phase { kConnecting, kSendingHello, kAwaitingAck };
    Target* target = nullptr;
    int stream = 0;
    size_t candidate = 0;
    ScopedFd fd;
    Phase phase = Phase::kConnecting;
    std::string hello;
    size_t sent = 0;
    char ack[kAckBytes] = {};
    size_t received = 0;
    absl::Time connect_by;
    bool finished = false;
  };
  struct Incoming {
    ScopedFd fd;
    std::string from;
    std::string hello;  // sized to what is needed so far
    size_t got = 0;
    bool answering = false;
    std::string ack;
    size_t sent = 0;
    Source* source = nullptr;  // set when the hello was accepted (its stream is reserved)
    uint32_t stream = 0;
    absl::Time give_up;
    bool finished = false;
  };

  absl::Status StartAttempt(Target& target, int stream, size_t candidate);
  absl::Status Retry(Target& target, int stream, size_t candidate, absl::string_view why);
  absl::Status Unreachable(const Target& target, int stream) const;
  absl::Status StepOutgoing(Outgoing& out, short revents);
  absl::Status Connected(Outgoing& out);
  absl::Status AcceptAll();
  void StepIncoming(Incoming& in, absl::Time now);
  AckCode Judge(const Hello& hello, Incoming& in);
  void Drop(Incoming& in, absl::string_view why);
  bool Complete() const;
  std::string Waiting() const;

  const MeshPlan& plan_;
  const int listen_fd_;
  const Deadline& deadline_;
  std::vector<Target> targets_;
  std::vector<Source> sources_;
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
  absl::Time accept_paused_until_ = absl::InfinitePast();
};

MeshConnector::MeshConnector(const MeshPlan& plan, int listen_fd, const Deadline& deadline)
    : plan_(plan), listen_fd_(listen_fd), deadline_(deadline) {
  for (int peer : plan.peers) {
    if (peer > plan.rank) {
      Target target;
      target.peer = peer;
      const ListenerRecord& record = plan.listeners.at(peer);
      const bool same_host = record.host_id == plan.host_id;
      for (const InterfaceAddress& a : record.addresses) {
        if (a.address.IsLoopback() && !same_host && !plan.loopback_chosen) {
          target.tried.push_back(absl::StrCat(a.address.ToString(), " (", a.name,
                                              "): skipped, a loopback address of another host"));
        } else {
          target.addresses.push_back(a);
        }
      }
      // A peer on this host is reached over loopback first: the traffic then never leaves the
      // kernel's loopback device, whatever routes the other interfaces have.
      if (same_host) {
        std::stable_partition(target.addresses.begin(), target.addresses.end(),
                              [](const InterfaceAddress& a) { return a.address.IsLoopback(); });
      }
      target.streams.resize(plan.nstreams);
      targets_.push_back(std::move(target));
    } else {
      Source source;
      source.peer = peer;
      sources_.push_back(std::move(source));
    }
  }
}

absl::StatusOr<std::vector<PeerStreams>> MeshConnector::Run() {
  for (Target& target : targets_) {
    if (target.addresses.empty()) return Unreachable(target, 0);
    if (absl::Status s = StartAttempt(target, 0, 0); !s.ok()) return s;
  }
  std::vector<pollfd> fds;
  while (!Complete()) {
    if (deadline_.Expired() || deadline_.Aborted()) {
      return deadline_.Check(absl::StrCat("rank ", plan_.rank,
                                          ": tcp transport: connecting to its peers, still waiting "
                                          "for ",
                                          Waiting()));
    }
    fds.clear();
    const bool accepting = absl::Now() >= accept_paused_until_;
    fds.push_back(pollfd{accepting ? listen_fd_ : -1, POLLIN, 0});  // poll() skips fd -1
    for (const auto& out : outgoing_) {
      const short events = out->phase == Outgoing::Phase::kAwaitingAck ? POLLIN : POLLOUT;
      fds.push_back(pollfd{out->fd.get(), events, 0});
    }
    for (const auto& in : incoming_) {
      fds.push_back(pollfd{in->fd.get(), static_cast<short>(in->answering ? POLLOUT : POLLIN), 0});
    }
    if (poll(fds.data(), fds.size(), deadline_.PollTimeoutMs(kPollCapMs)) < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("rank ", plan_.rank, ": tcp transport: poll(): ", ErrnoText(errno)));
    }
    // Steps may start new attempts; those are polled from the next round on.
    const size_t polled_out = outgoing_.size();
    const size_t polled_in = incoming_.size();
    for (size_t i = 0; i < polled_out; ++i) {
      if (absl::Status s = StepOutgoing(*outgoing_[i], fds[1 + i].revents); !s.ok()) return s;
    }
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < polled_in; ++i) StepIncoming(*incoming_[i], now);
    if (fds[0].revents != 0) {
      if (absl::Status s = AcceptAll(); !s.ok()) return s;
    }
    std::erase_if(outgoing_, [](const auto& out) { return out->finished; });
    std::erase_if(incoming_, [](const auto& in) { return in->finished; });
  }

  std::vector<PeerStreams> result;
  for (int peer : plan_.peers) {
    PeerStreams entry;
    entry.peer = peer;
    for (Target& target : targets_) {
      if (target.peer != peer) continue;
      const InterfaceAddress& used = target.addresses[target.chosen];
      entry.streams = std::move(target.streams);
      entry.address = used.address.ToString();
      entry.interface = used.name;
    }
    for (Source& source : sources_) {
      if (source.peer != peer) continue;
      entry.streams = std::move(source.streams);
      entry.address = source.address;
    }
    result.push_back(std::move(entry));
  }
  return result;
}

absl::Status MeshConnector::StartAttempt(Target& target, int stream, size_t candidate) {
  const InterfaceAddress& to = target.addresses[candidate];
  auto out = std::make_unique<Outgoing>();
  if (const int err = StartConnect(to.address, &out->fd); err != 0) {
    return Retry(target, stream, candidate, ErrnoText(err));
  }
  out->target = &target;
  out->stream = stream;
  out->candidate = candidate;
  out->hello = EncodeHello(Hello{.version = kHandshakeVersion,
                                 .from_rank = plan_.rank,
                                 .to_rank = target.peer,
                                 .stream = static_cast<uint32_t>(stream),
                                 .nstreams = static_cast<uint32_t>(plan_.nstreams),
                                 .token = plan_.token,
                                 .unique_name = plan_.unique_name});
  out->connect_by = absl::Now() + kAttemptTimeout;
  outgoing_.push_back(std::move(out));
  return absl::OkStatus();
}

absl::Status MeshConnector::Retry(Target& target, int stream, size_t candidate,
                                  absl::string_view why) {
  const InterfaceAddress& to = target.addresses[candidate];
  target.tried.push_back(absl::StrCat(to.address.ToString(), " (", to.name, "): ", why));
  // Stream 0 probes the addresses; later streams go where stream 0 succeeded or not at all.
  if (stream == 0 && candidate + 1 < target.addresses.size()) {
    return StartAttempt(target, 0, candidate + 1);
  }
  return Unreachable(target, stream);
}

absl::Status MeshConnector::Unreachable(const Target& target, int stream) const {
  const std::string tried =
      target.tried.empty() ? "no addresses were published" : absl::StrJoin(target.tried, "; ");
  if (stream > 0) {
    return absl::UnavailableError(absl::StrCat("rank ", plan_.rank, ": tcp transport: stream ",
                                               stream, " to rank ", target.peer,
                                               " failed after stream 0 connected: ", tried));
  }
  return absl::UnavailableError(absl::StrCat("rank ", plan_.rank,
                                             ": tcp transport: cannot reach rank ", target.peer,
                                             " at any of its addresses: ", tried, ". ", kHint));
}

absl::Status MeshConnector::StepOutgoing(Outgoing& out, short revents) {
  Target& target = *out.target;
  if (out.phase == Outgoing::Phase::kConnecting) {
    if (revents == 0) {
      if (absl::Now() < out.connect_by) return absl::OkStatus();
      out.finished = true;
      return Retry(target, out.stream, out.candidate,
                   absl::StrCat("no answer within ", absl::FormatDuration(kAttemptTimeout),
                                " (connection timed out)"));
    }
    if (const int err = FinishConnect(out.fd.get()); err != 0) {
      out.finished = true;
      return Retry(target, out.stream, out.candidate, ErrnoText(err));
    }
    out.phase = Outgoing::Phase::kSendingHello;
  }
  if (out.phase == Outgoing::Phase::kSendingHello) {
    while (out.sent < out.hello.size()) {
      const ssize_t n = send(out.fd.get(), out.hello.data() + out.sent, out.hello.size() - out.sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && WouldBlock(errno)) return absl::OkStatus();
      if (n < 0) {
        out.finished = true;
        return Retry(target, out.stream, out.candidate,
                     absl::StrCat("sending the handshake: ", ErrnoText(errno)));
      }
      out.sent += static_cast<size_t>(n);
    }
    out.phase = Outgoing::Phase::kAwaitingAck;
  }
  while (out.received < kAckBytes) {
    const ssize_t n =
        recv(out.fd.get(), out.ack + out.received, kAckBytes - out.received, MSG_DONTWAIT);
    if (n < 0 && WouldBlock(errno)) return absl::OkStatus();
    if (n <= 0) {
      out.finished = true;
      return Retry(target, out.stream, out.candidate,
                   n == 0 ? "the listener closed the connection without answering the handshake "
                            "(not a rank of this communicator?)"
                          : absl::StrCat("waiting for the handshake answer: ", ErrnoText(errno)));
    }
    out.received += static_cast<size_t>(n);
  }
  out.finished = true;
  const std::optional<AckCode> code = DecodeAck(absl::string_view(out.ack, kAckBytes));
  if (!code.has_value()) {
    return Retry(target, out.stream, out.candidate,
                 "the listener answered with something that is not a Weft handshake");
  }
  if (*code != AckCode::kAccepted) {
    return Retry(target, out.stream, out.candidate, absl::StrCat("refused: ", Describe(*code)));
  }
  return Connected(out);
}

absl::Status MeshConnector::Connected(Outgoing& out) {
  Target& target = *out.target;
  target.streams[out.stream] = std::move(out.fd);
  ++target.connected;
  if (out.stream != 0) return absl::OkStatus();
  target.chosen = static_cast<int>(out.candidate);
  for (int stream = 1; stream < plan_.nstreams; ++stream) {
    if (absl::Status s = StartAttempt(target, stream, out.candidate); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status MeshConnector::AcceptAll() {
  while (true) {
    ScopedFd fd(accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (WouldBlock(errno) || errno == ECONNABORTED) return absl::OkStatus();
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory, perhaps because of a flood of stray connections: they
        // time out, so wait a little instead of failing the job or spinning on the listener.
        if (DebugEnabled(DebugLevel::kInfo)) {
          DebugLog(DebugLevel::kInfo,
                   absl::StrCat("rank ", plan_.rank,
                                ": tcp listener cannot accept for now: ", ErrnoText(errno)));
        }
        accept_paused_until_ = absl::Now() + kAcceptPause;
        return absl::OkStatus();
      }
      return absl::UnavailableError(
          absl::StrCat("rank ", plan_.rank, ": tcp transport: accept(): ", ErrnoText(errno)));
    }
    // Accepted sockets inherit the listener's options; this only makes TCP_NODELAY certain.
    if (const int err = ApplyStreamOptions(fd.get()); err != 0) {
      return absl::UnavailableError(
          absl::StrCat("rank ", plan_.rank,
                       ": tcp transport: setsockopt() on an accepted socket: ", ErrnoText(err)));
    }
    auto in = std::make_unique<Incoming>();
    in->from = PeerAddressOf(fd.get());
    in->fd = std::move(fd);
    in->hello.resize(kHelloFixedBytes);
    in->give_up = absl::Now() + kHelloTimeout;
    incoming_.push_back(std::move(in));
  }
}

void MeshConnector::StepIncoming(Incoming& in, absl::Time now) {
  while (!in.answering) {
    const ssize_t n =
        recv(in.fd.get(), in.hello.data() + in.got, in.hello.size() - in.got, MSG_DONTWAIT);
    if (n < 0 && WouldBlock(errno)) {
      if (now >= in.give_up) {
        Drop(in, absl::StrCat("no complete hello within ", absl::FormatDuration(kHelloTimeout)));
      }
      return;
    }
    if (n <= 0) {
      return Drop(in, n == 0 ? "it closed the connection before completing its hello"
                             : absl::StrCat("reading its hello: ", ErrnoText(errno)));
    }
    in.got += static_cast<size_t>(n);
    if (in.got < in.hello.size()) continue;
    if (in.got == kHelloFixedBytes) {
      const std::optional<size_t> size = HelloSize(in.hello);
      if (!size.has_value()) return Drop(in, "it sent something that is not a Weft hello");
      in.hello.resize(*size);
      if (in.got < in.hello.size()) continue;
    }
    const AckCode code = Judge(DecodeHello(in.hello), in);
    if (code != AckCode::kAccepted && DebugEnabled(DebugLevel::kInfo)) {
      DebugLog(DebugLevel::kInfo,
               absl::StrCat("rank ", plan_.rank, ": tcp listener refused a connection from ",
                            in.from, ": ", Describe(code)));
    }
    in.ack = EncodeAck(code);
    in.answering = true;
  }
  while (in.sent < in.ack.size()) {
    const ssize_t n = send(in.fd.get(), in.ack.data() + in.sent, in.ack.size() - in.sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && WouldBlock(errno)) {
      if (now >= in.give_up) Drop(in, "its handshake answer could not be delivered in time");
      return;
    }
    if (n < 0) return Drop(in, absl::StrCat("answering its hello: ", ErrnoText(errno)));
    in.sent += static_cast<size_t>(n);
  }
  in.finished = true;
  if (in.source == nullptr) return;  // refused: the answer told the connector why
  Source& source = *in.source;
  if (in.stream == 0) source.address = in.from;
  source.streams[in.stream] = std::move(in.fd);
  ++source.accepted;
}

AckCode MeshConnector::Judge(const Hello& hello, Incoming& in) {
  if (hello.version != kHandshakeVersion) return AckCode::kBadVersion;
  if (!SameSecret(hello.token, plan_.token)) return AckCode::kWrongToken;
  if (hello.unique_name != plan_.unique_name) return AckCode::kWrongCommunicator;
  Source* source = nullptr;
  for (Source& s : sources_) {
    if (s.peer == hello.from_rank) source = &s;
  }
  if (hello.to_rank != plan_.rank || source == nullptr) return AckCode::kUnexpectedRank;
  const int nstreams = static_cast<int>(hello.nstreams);
  if (nstreams < 1 || nstreams > kMaxStreams || hello.stream >= hello.nstreams ||
      (source->nstreams != 0 && source->nstreams != nstreams)) {
    return AckCode::kBadStream;
  }
  if (source->nstreams == 0) {
    source->nstreams = nstreams;
    source->streams.resize(nstreams);
    source->reserved.resize(nstreams, false);
  }
  if (source->reserved[hello.stream]) return AckCode::kDuplicateStream;
  source->reserved[hello.stream] = true;
  in.source = source;
  in.stream = hello.stream;
  return AckCode::kAccepted;
}

void MeshConnector::Drop(Incoming& in, absl::string_view why) {
  // A connection that was accepted but lost before its ack went out frees its stream, so the
  // connector's next attempt for it can be accepted.
  if (in.source != nullptr) in.source->reserved[in.stream] = false;
  in.source = nullptr;
  in.finished = true;
  if (DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo,
             absl::StrCat("rank ", plan_.rank, ": tcp listener dropped a connection from ", in.from,
                          ": ", why));
  }
}

bool MeshConnector::Complete() const {
  for (const Target& target : targets_) {
    if (target.connected < plan_.nstreams) return false;
  }
  for (const Source& source : sources_) {
    if (source.nstreams == 0 || source.accepted < source.nstreams) return false;
  }
  return true;
}

std::string MeshConnector::Waiting() const {
  std::vector<std::string> parts;
  for (const Target& target : targets_) {
    if (target.connected == plan_.nstreams) continue;
    std::string state = "no attempt in flight";
    for (const auto& out : outgoing_) {
      if (out->target != &target) continue;
      state = absl::StrCat(
          "stream ", out->stream, " at ", target.addresses[out->candidate].address.ToString(),
          out->phase == Outgoing::Phase::kConnecting ? " is connecting"
                                                     : " awaits the handshake answer");
    }
    parts.push_back(absl::StrCat("rank ", target.peer, " (", state, ")"));
  }
  for (const Source& source : sources_) {
    if (source.nstreams != 0 && source.accepted == source.nstreams) continue;
    parts.push_back(
        absl::StrCat("rank ", source.peer, " (", source.accepted, " of ",
                     source.nstreams == 0 ? std::string("its") : absl::StrCat(source.nstreams),
                     " streams connected to this rank)"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::StatusOr<std::vector<PeerStreams>> ConnectMesh(const MeshPlan& plan, int listen_fd,
                                                     const Deadline& deadline) {
  return MeshConnector(plan, listen_fd, deadline).Run();
}

}  // namespace weft::tcp
