#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "weft/kernels/reduce.h"

namespace weft::tcp {
namespace {

// Enough iovecs to batch dozens of small messages, or a large share's chunks, into one call.
constexpr size_t kMaxIov = 64;
// How many queued messages one gather looks through: on streams other than 0 most small messages
// carry nothing, and a long queue of them must not make every call walk it.
constexpr uint64_t kMaxGatherMessages = 4 * kMaxIov;
// Copying receives with at least this much of the stream's share left read straight into the
// destination (scattering over its chunks); smaller rests go through the stream's buffer, which
// then also picks up the headers that follow.
constexpr size_t kDirectReadBytes = 16 << 10;

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

}  // namespace

TcpLink::TcpLink(int rank, int peer, std::string peer_address, std::vector<ScopedFd> streams)
    : rank_(rank), peer_(peer), peer_address_(std::move(peer_address)) {
  streams_.resize(streams.size());
  for (size_t s = 0; s < streams.size(); ++s) streams_[s].fd = std::move(streams[s]);
  iov_.reserve(kMaxIov);
}

uint64_t TcpLink::PostSend(const Envelope& envelope, const void* data, size_t bytes) {
  const uint64_t id = sends_posted_++;
  SendOp op;
  op.header.bytes = bytes;
  op.header.envelope = envelope;
  op.data = static_cast<const char*>(data);
  op.layout = StripeLayout(bytes, nstreams());
  op.header.flags = op.layout.striped() ? kFrameStriped : 0;
  // Streams with nothing to carry skip the message now, so AddPollFds() asks only for what can
  // move: each send cursor rests on a message it has bytes of, or at the end of the queue.
  for (size_t s = 1; s < streams_.size(); ++s) {
    if (streams_[s].send.message == id && op.layout.ShareBytes(static_cast<int>(s)) == 0) {
      streams_[s].send.message = id + 1;
    }
  }
  sends_.push_back(op);
  return id;
}

uint64_t TcpLink::PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) {
  const uint64_t id = recvs_posted_++;
  RecvOp op;
  op.expected = envelope;
  op.bytes = bytes;
  op.sink = sink;
  op.layout = StripeLayout(bytes, nstreams());
  if (sink.mode == RecvSink::Mode::kReduce) {
    op.element_bytes = IsValid(sink.dtype) ? SizeOf(sink.dtype) : 0;
    if (op.element_bytes == 0 || !IsValid(sink.op) || bytes % op.element_bytes != 0) {
      // Reported by the next Progress(), like every other failure of the link.
      Fail(absl::InvalidArgumentError(absl::StrCat(
               Who(), ": reducing receive #", id, " of ", bytes, " bytes: not a whole number of ",
               op.element_bytes == 0 ? "(invalid type)" : Name(sink.dtype),
               " elements, or an invalid reduction operator")))
          .IgnoreError();
    }
  }
  recvs_.push_back(op);
  return id;
}

absl::StatusOr<bool> TcpLink::Progress() {
  if (!error_.ok()) return error_;
  bool moved = false;
  // Stream 0 goes first: it validates the headers the other streams wait for.
  for (size_t s = 0; s < streams_.size(); ++s) {
    absl::StatusOr<bool> sent = PumpSend(s);
    if (!sent.ok()) return sent.status();
    absl::StatusOr<bool> received = PumpRecv(s);
    if (!received.ok()) return received.status();
    moved = moved || *sent || *received;
  }
  RetireCompleted();
  return moved;
}

void TcpLink::AddPollFds(std::vector<pollfd>* fds) const {
  for (size_t s = 0; s < streams_.size(); ++s) {
    const Stream& stream = streams_[s];
    short events = 0;
    if (stream.send.message < sends_posted_) events |= POLLOUT;
    if (stream.recv.message < recvs_posted_ && (s == 0 || HeaderReceived(stream.recv.message))) {
      events |= POLLIN;
    }
    if (events != 0) fds->push_back(pollfd{stream.fd.get(), events, 0});
  }
}

absl::StatusOr<bool> TcpLink::PumpSend(size_t s) {
  Stream& stream = streams_[s];
  bool moved = false;
  while (true) {
    SkipFinishedSends(stream, s);
    if (stream.send.message == sends_posted_) return moved;
    // Gather this stream's next pieces, across messages, into one sendmsg().
    iov_.clear();
    size_t total = 0;
    Cursor at = stream.send;
    const uint64_t look_until = std::min(sends_posted_, at.message + kMaxGatherMessages);
    while (iov_.size() < kMaxIov && at.message < look_until) {
      SendOp& op = sends_[at.message - sends_done_];
      if (at.position == Share(op.layout, s)) {
        ++at.message;
        at.position = 0;
        continue;
      }
      iovec piece;
      if (s == 0 && at.position < kFrameHeaderBytes) {
        piece.iov_base = reinterpret_cast<char*>(&op.header) + at.position;
        piece.iov_len = kFrameHeaderBytes - at.position;
      } else {
        const size_t header = s == 0 ? kFrameHeaderBytes : 0;
        const StripeLayout::Span span = op.layout.Locate(static_cast<int>(s), at.position - header);
        piece.iov_base = const_cast<char*>(op.data + span.offset);
        piece.iov_len = span.length;
      }
      iov_.push_back(piece);
      total += piece.iov_len;
      at.position += piece.iov_len;
    }
    msghdr message{};
    message.msg_iov = iov_.data();
    message.msg_iovlen = iov_.size();
    const ssize_t n = sendmsg(stream.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (WouldBlock(errno)) return moved;
      return StreamError(s, "sending", errno);
    }
    moved = true;
    for (size_t left = static_cast<size_t>(n); left > 0;) {
      const SendOp& op = sends_[stream.send.message - sends_done_];
      const size_t share = Share(op.layout, s);
      const size_t take = std::min(left, share - stream.send.position);
      stream.send.position += take;
      left -= take;
      if (stream.send.position == share) {
        ++stream.send.message;
        stream.send.position = 0;
      }
    }
    if (static_cast<size_t>(n) < total) return moved;  // the socket is full
  }
}

absl::StatusOr<bool> TcpLink::PumpRecv(size_t s) {
  Stream& stream = streams_[s];
  bool moved = false;
  while (true) {
    SkipFinishedRecvs(stream, s);
    if (stream.recv.message == recvs_posted_) return moved;
    if (s > 0 && !HeaderReceived(stream.recv.message)) return moved;
    RecvOp& op = recvs_[stream.recv.message - recvs_done_];

    absl::StatusOr<ReadResult> read = ReadResult::kData;
    if (s == 0 && stream.recv.position < kFrameHeaderBytes) {
      if (stream.buffer.size() >= kFrameHeaderBytes) {
        if (absl::Status status = ReceiveHeader(s, op); !status.ok()) return status;
        moved = true;
        continue;
      }
      read = ReadIntoBuffer(s);
    } else if (!stream.buffer.empty()) {
      bool needs_more = false;
      if (absl::Status status = DeliverBuffered(s, op, &needs_more); !status.ok()) return status;
      if (!needs_more) {
        moved = true;
        continue;
      }
      read = ReadIntoBuffer(s);  // a partial element waits for the rest of its bytes
    } else {
      const size_t left = Share(op.layout, s) - stream.recv.position;
      const bool direct = op.sink.mode == RecvSink::Mode::kCopy && left >= kDirectReadBytes;
      read = direct ? ReadDirect(s, op) : ReadIntoBuffer(s);
    }
    if (!read.ok()) return read.status();
    if (*read == ReadResult::kWouldBlock) return moved;
    moved = true;
  }
}

absl::Status TcpLink::ReceiveHeader(size_t s, const RecvOp& op) {
  Stream& stream = streams_[s];
  FrameHeader got;
  std::memcpy(&got, stream.buffer.data(), kFrameHeaderBytes);
  const uint64_t id = stream.recv.message;
  if (got.magic != kFrameMagic) {
    return Fail(absl::DataLossError(absl::StrFormat(
        "%s: malformed data where the header of message #%d should start (magic 0x%08x, "
        "expected 0x%08x): the byte stream is corrupt or the peer is not a Weft rank of this "
        "version",
        Who(), id, got.magic, kFrameMagic)));
  }
  if ((got.flags & ~kKnownFrameFlags) != 0 || got.bytes > kMaxMessageBytes) {
    return Fail(absl::DataLossError(absl::StrFormat(
        "%s: malformed header of message #%d (flags 0x%x, %d bytes): the byte stream is corrupt",
        Who(), id, got.flags, got.bytes)));
  }
  if (!(got.envelope == op.expected) || got.bytes != op.bytes) {
    const absl::Status mismatch = EnvelopeMismatch(op.expected, op.bytes, got.envelope, got.bytes);
    return Fail(absl::Status(mismatch.code(),
                             absl::StrCat(Who(), ": receive #", id, ": ", mismatch.message())));
  }
  if (((got.flags & kFrameStriped) != 0) != op.layout.striped()) {
    return Fail(absl::DataLossError(
        absl::StrCat(Who(), ": message #", id, " of ", got.bytes, " bytes is ",
                     op.layout.striped() ? "not striped" : "striped",
                     " by the peer, unlike here: the two ends disagree on the stream layout")));
  }
  stream.buffer.Consume(kFrameHeaderBytes);
  stream.recv.position = kFrameHeaderBytes;
  return absl::OkStatus();
}

absl::Status TcpLink::DeliverBuffered(size_t s, RecvOp& op, bool* needs_more) {
  Stream& stream = streams_[s];
  const size_t header = s == 0 ? kFrameHeaderBytes : 0;
  const StripeLayout::Span span =
      op.layout.Locate(static_cast<int>(s), stream.recv.position - header);
  const size_t available = std::min(stream.buffer.size(), span.length);
  if (op.sink.mode == RecvSink::Mode::kCopy) {
    std::memcpy(static_cast<char*>(op.sink.dst) + span.offset, stream.buffer.data(), available);
    stream.buffer.Consume(available);
    stream.recv.position += available;
    return absl::OkStatus();
  }
  // Chunk boundaries and the message size are multiples of the element size, so `span` starts
  // and ends on element boundaries; only the buffered bytes can end inside an element.
  const size_t whole = available - available % op.element_bytes;
  if (whole == 0) {
    *needs_more = true;
    return absl::OkStatus();
  }
  if (reinterpret_cast<uintptr_t>(stream.buffer.data()) % op.element_bytes != 0) {
    stream.buffer.Compact();  // the kernels read elements at their natural alignment
  }
  op.sink.ReduceArrived(span.offset, stream.buffer.data(), whole / op.element_bytes);
  stream.buffer.Consume(whole);
  stream.recv.position += whole;
  return absl::OkStatus();
}

absl::StatusOr<TcpLink::ReadResult> TcpLink::ReadIntoBuffer(size_t s) {
  Stream& stream = streams_[s];
  size_t room = 0;
  char* tail = stream.buffer.Tail(&room);
  while (true) {
    const ssize_t n = recv(stream.fd.get(), tail, room, MSG_DONTWAIT);
    if (n > 0) {
      stream.buffer.Commit(static_cast<size_t>(n));
      return ReadResult::kData;
    }
    if (n == 0) return PeerClosed(s, "receiving");
    if (errno == EINTR) continue;
    if (WouldBlock(errno)) return ReadResult::kWouldBlock;
    return StreamError(s, "receiving", errno);
  }
}

absl::StatusOr<TcpLink::ReadResult> TcpLink::ReadDirect(size_t s, const RecvOp& op) {
  Stream& stream = streams_[s];
  const size_t header = s == 0 ? kFrameHeaderBytes : 0;
  const size_t share = op.layout.ShareBytes(static_cast<int>(s));
  char* dst = static_cast<char*>(op.sink.dst);
  iov_.clear();
  for (size_t at = stream.recv.position - header; iov_.size() < kMaxIov && at < share;) {
    const StripeLayout::Span span = op.layout.Locate(static_cast<int>(s), at);
    iov_.push_back(iovec{dst + span.offset, span.length});
    at += span.length;
  }
  msghdr message{};
  message.msg_iov = iov_.data();
  message.msg_iovlen = iov_.size();
  while (true) {
    const ssize_t n = recvmsg(stream.fd.get(), &message, MSG_DONTWAIT);
    if (n > 0) {
      stream.recv.position += static_cast<size_t>(n);
      return ReadResult::kData;
    }
    if (n == 0) return PeerClosed(s, "receiving");
    if (errno == EINTR) continue;
    if (WouldBlock(errno)) return ReadResult::kWouldBlock;
    return StreamError(s, "receiving", errno);
  }
}

void TcpLink::SkipFinishedSends(Stream& stream, size_t s) {
  while (stream.send.message < sends_posted_ &&
         stream.send.position == Share(sends_[stream.send.message - sends_done_].layout, s)) {
    ++stream.send.message;
    stream.send.position = 0;
  }
}

void TcpLink::SkipFinishedRecvs(Stream& stream, size_t s) {
  while (stream.recv.message < recvs_posted_ && (s == 0 || HeaderReceived(stream.recv.message)) &&
         stream.recv.position == Share(recvs_[stream.recv.message - recvs_done_].layout, s)) {
    ++stream.recv.message;
    stream.recv.position = 0;
  }
}

bool TcpLink::HeaderReceived(uint64_t message) const {
  const Cursor& first = streams_[0].recv;
  return first.message > message ||
         (first.message == message && first.position >= kFrameHeaderBytes);
}

void TcpLink::RetireCompleted() {
  uint64_t sent = sends_posted_;
  uint64_t received = recvs_posted_;
  for (size_t s = 0; s < streams_.size(); ++s) {
    SkipFinishedSends(streams_[s], s);
    SkipFinishedRecvs(streams_[s], s);
    sent = std::min(sent, streams_[s].send.message);
    received = std::min(received, streams_[s].recv.message);
  }
  for (; sends_done_ < sent; ++sends_done_) sends_.pop_front();
  for (; recvs_done_ < received; ++recvs_done_) recvs_.pop_front();
}

absl::Status TcpLink::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
  return error_;
}

absl::Status TcpLink::StreamError(size_t s, absl::string_view doing, int err) {
  return Fail(absl::UnavailableError(
      absl::StrCat(Who(), " closed: ", doing, " on stream ", s, " failed: ", ErrnoText(err),
                   "; the peer process probably exited or crashed, check its output")));
}

absl::Status TcpLink::PeerClosed(size_t s, absl::string_view doing) {
  return Fail(absl::UnavailableError(
      absl::StrCat(Who(), " closed: the peer ended stream ", s, " while this rank was ", doing,
                   "; the peer process probably exited or crashed, check its output")));
}

std::string TcpLink::Who() const {
  return absl::StrCat("rank ", rank_, ": connection to rank ", peer_, " (", peer_address_, ")");
}

}  // namespace weft::tcp
