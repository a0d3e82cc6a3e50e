// Link and Transport: the narrow interface between Weft's algorithms and the wire.
//
// A Link is an ordered, reliable, full-duplex message channel to one peer. Algorithms queue
// sends and receives on links and then drive them with Progress() until the transfers they wait
// for are done; nothing in this interface blocks. Every message travels with an Envelope that
// describes the operation it belongs to; a receive names the envelope and byte count it expects,
// and a message that differs fails the receive with both envelopes in the error, so a mismatched
// collective becomes a readable error instead of corrupted data or a hang.
//
// A Transport is a factory of links: Connect() is called once per communicator with the peers this
// transport should reach and returns a link for each. Shared memory serves peers on this host,
// TCP peers elsewhere (or any peer, when forced by WEFT_TRANSPORT).
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bootstrap/store.h"
#include "deadline.h"
#include "weft/kernels/dtype.h"
#include "weft/kernels/reduce.h"

namespace weft {

// What a message says about itself. The communicator fills it; transports carry it verbatim and
// compare it with the receiver's expectation.
struct Envelope {
  uint64_t seq = 0;    // collective sequence number, or p2p message index between the pair
  uint64_t count = 0;  // element count of the whole operation (its fingerprint)
  uint32_t step = 0;   // algorithm step or chunk within the operation
  uint16_t kind = 0;   // OpKind
  uint8_t dtype = 0;   // DataType
  uint8_t op = 0;      // ReduceOp
  int32_t root_or_tag = 0;
  uint32_t algorithm = 0;  // which algorithm sent it: peers must agree on it
  bool operator==(const Envelope&) const = default;
};
static_assert(sizeof(Envelope) == 32, "Envelope is part of the wire format");

// Human-readable form of an envelope, e.g. "all_reduce #17 step 3 count=1024 float sum".
// Defined by the communicator layer, which knows what the numbers mean.
std::string DescribeEnvelope(const Envelope& envelope);

// The error a link reports when a message differs from what the receive expected.
absl::Status EnvelopeMismatch(const Envelope& expected, size_t expected_bytes, const Envelope& got,
                              size_t got_bytes);

// What a receive does with the bytes that arrive: copy them to `dst`, or combine them with `op`
// into `dst` (the fused receive-reduce that spares a staging copy). A reducing sink's left operand
// is the values already at `dst`, or those at `base` (same layout) when it has one: dst = base op
// received, so a ring can reduce from the caller's read-only input without first copying it.
struct RecvSink {
  enum class Mode : uint8_t { kCopy, kReduce };
  Mode mode = Mode::kCopy;
  void* dst = nullptr;
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  const void* base = nullptr;  // kReduce's left operand; null means dst's own values

  static RecvSink Copy(void* dst) {
    return RecvSink{Mode::kCopy, dst, DataType::kUint8, ReduceOp::kSum, nullptr};
  }
  static RecvSink Reduce(void* dst, DataType dtype, ReduceOp op, const void* base = nullptr) {
    return RecvSink{Mode::kReduce, dst, dtype, op, base};
  }

  // kReduce: combines `count` elements that arrived for the message's bytes from `offset` on.
  void ReduceArrived(size_t offset, const void* arrived, size_t count) const {
    std::byte* out = static_cast<std::byte*>(dst) + offset;
    const void* left = base == nullptr ? out : static_cast<const std::byte*>(base) + offset;
    weft::Reduce(dtype, op, out, left, arrived, count);
  }
};

class Link {
 public:
  virtual ~Link() = default;

  // Queues a message of `bytes` bytes (0 allowed). `data` must stay valid and unchanged until
  // SendDone(id). Ids count from 0 per direction.
  virtual uint64_t PostSend(const Envelope& envelope, const void* data, size_t bytes) = 0;

  // Queues the receive of the next message, which must carry `envelope` and exactly `bytes`
  // bytes. For RecvSink::Mode::kReduce, `bytes` is a multiple of the element size and the
  // transport applies the reduction element-wise, never to a partial element.
  virtual uint64_t PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) = 0;

  // Moves queued messages as far as it can without blocking. Returns whether anything moved.
  // An error (peer closed, malformed data, envelope mismatch) is final: the link is unusable.
  virtual absl::StatusOr<bool> Progress() = 0;

  virtual bool SendDone(uint64_t id) const = 0;
  virtual bool RecvDone(uint64_t id) const = 0;

  // File descriptors an idle waiter may poll() on to wake as soon as this link can move.
  virtual void AddPollFds(std::vector<pollfd>* fds) const { (void)fds; }

  virtual int peer() const = 0;
  virtual absl::string_view transport_name() const = 0;
};

// What a transport needs to connect one communicator's links.
struct ConnectContext {
  Store* store = nullptr;  // private to this communicator: keys cannot collide
  int rank = 0;
  int size = 1;
  std::vector<std::string> host_ids;  // per rank, from weft::HostIdentity()
  std::string token;                  // the job secret every connection must present
  std::string unique_name;            // unique per communicator on this host (shm object names)
  Deadline deadline = Deadline::In(absl::Seconds(300));
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual absl::string_view name() const = 0;

  // Collective: every rank of the communicator calls it (with an empty `peers` when it has
  // none for this transport), and `peers` lists are symmetric (a lists b iff b lists a).
  // Returns one link per entry of `peers`, in the same order.
  virtual absl::StatusOr<std::vector<std::unique_ptr<Link>>> Connect(
      const ConnectContext& context, const std::vector<int>& peers) = 0;
};

// Reads WEFT_SOCKET_IFNAME (interfaces to use, comma separated; "^lo" style exclusion allowed)
// and WEFT_SOCKET_NSTREAMS (sockets per peer, default 2).
std::unique_ptr<Transport> MakeTcpTransport();
std::unique_ptr<Transport> MakeShmTransport();

}  // namespace weft
