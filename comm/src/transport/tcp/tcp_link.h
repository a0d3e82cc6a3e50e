// TcpLink: a Link over one or more TCP connections ("streams") to one peer.
//
// Every message is a FrameHeader on stream 0 followed by its payload, which stays on stream 0
// when small and is striped over all streams when large (stripe_layout.h). Each stream moves its
// own byte sequence independently: a send cursor and a receive cursor per stream say how far into
// which message that stream has got, so one full socket never stalls the others. Operations
// complete in the order they were posted.
//
// Receives read no header before one is posted to hold it: the bytes wait in the socket (or the
// stream's ReceiveBuffer), which back-pressures the sender rather than buffering unboundedly.
// Streams other than 0 start on a message only once stream 0 has validated its header, so a
// mismatched message never writes into the receive's destination.
//
// Not thread-safe: one thread drives a link at a time.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/link.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/receive_buffer.h"
#include "transport/tcp/ring_queue.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/stripe_layout.h"

namespace weft::tcp {

class TcpLink final : public Link {
 public:
  // `streams` are connected, in stream order; `peer_address` ("ip:port") is for messages.
  TcpLink(int rank, int peer, std::string peer_address, std::vector<ScopedFd> streams);

  uint64_t PostSend(const Envelope& envelope, const void* data, size_t bytes) override;
  uint64_t PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) override;
  absl::StatusOr<bool> Progress() override;
  bool SendDone(uint64_t id) const override { return id < sends_done_; }
  bool RecvDone(uint64_t id) const override { return id < recvs_done_; }
  void AddPollFds(std::vector<pollfd>* fds) const override;
  int peer() const override { return peer_; }
  absl::string_view transport_name() const override { return "tcp"; }

  int nstreams() const { return static_cast<int>(streams_.size()); }

 private:
  struct SendOp {
    FrameHeader header;
    const char* data = nullptr;
    StripeLayout layout;
  };
  struct RecvOp {
    Envelope expected;
    size_t bytes = 0;
    RecvSink sink;
    size_t element_bytes = 1;  // of the sink's type when reducing
    StripeLayout layout;
  };
  // How far one stream has got in one direction: the message id it is on and the bytes of its
  // share of that message already moved (on stream 0 the share begins with the header).
  struct Cursor {
    uint64_t message = 0;
    size_t position = 0;
  };
  struct Stream {
    ScopedFd fd;
    Cursor send;
    Cursor recv;
    ReceiveBuffer buffer;
  };
  // The result of one read from a socket.
  enum class ReadResult { kData, kWouldBlock };

  // Bytes `stream` carries for a message, header included on stream 0.
  static size_t Share(const StripeLayout& layout, size_t stream) {
    return (stream == 0 ? kFrameHeaderBytes : 0) + layout.ShareBytes(static_cast<int>(stream));
  }

  absl::StatusOr<bool> PumpSend(size_t s);
  absl::StatusOr<bool> PumpRecv(size_t s);
  absl::Status ReceiveHeader(size_t s, const RecvOp& op);
  absl::Status DeliverBuffered(size_t s, RecvOp& op, bool* needs_more);
  absl::StatusOr<ReadResult> ReadIntoBuffer(size_t s);
  absl::StatusOr<ReadResult> ReadDirect(size_t s, const RecvOp& op);
  void SkipFinishedSends(Stream& stream, size_t s);
  void SkipFinishedRecvs(Stream& stream, size_t s);
  bool HeaderReceived(uint64_t message) const;
  void RetireCompleted();

  absl::Status Fail(absl::Status status);
  absl::Status StreamError(size_t s, absl::string_view doing, int err);
  absl::Status PeerClosed(size_t s, absl::string_view doing);
  std::string Who() const;

  const int rank_;
  const int peer_;
  const std::string peer_address_;
  std::vector<Stream> streams_;

  RingQueue<SendOp> sends_;  // sends_[0] has id sends_done_
  uint64_t sends_posted_ = 0;
  uint64_t sends_done_ = 0;
  RingQueue<RecvOp> recvs_;  // recvs_[0] has id recvs_done_
  uint64_t recvs_posted_ = 0;
  uint64_t recvs_done_ = 0;

  absl::Status error_;      // the first failure; final
  std::vector<iovec> iov_;  // scratch for gathering writes and scattering reads
};

}  // namespace weft::tcp
