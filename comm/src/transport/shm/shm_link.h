// ShmLink: a Link to a rank on this host through shared memory.
//
// Each direction is a single-producer/single-consumer FIFO of slots (ring.h) in a segment the
// receiving rank created. Sending copies the user's buffer into slots; receiving consumes straight
// from the slot: a copy receive memcpy()s to the destination and a reduce receive combines the
// slot into the destination (RecvSink::ReduceArrived), so the fused receive-reduce reads shared
// memory once and never stages the data. A message longer than the whole FIFO streams through it:
// the sender refills slots as the receiver frees them, so both copies run concurrently.
//
// With WEFT_SHM_CMA=1 in both ranks' environments, messages of kRemoteReadMinBytes and more
// skip the slots when the receiver may read the sender's memory (decided at connect time by a
// probe): the sender publishes the buffer's address and the receiver copies it with
// process_vm_readv, one kernel copy instead of two. It is off by default because the kernel copies
// page by page, slower than the slots' two memcpy()s for large and cache-resident messages alike.
//
// Progress() touches only shared memory while data moves. After kProcessCheckIntervalNs without
// movement while work is pending it checks (one system call) whether the peer process has exited
// or destroyed its end of the link, and fails instead of waiting for the deadline.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/link.h"
#include "transport/shm/process_watch.h"
#include "transport/shm/ring.h"
#include "transport/shm/shm_segment.h"

namespace weft {

class ShmLink final : public Link {
 public:
  // Below this size (when remote reads are enabled at all) the second copy through the slots
  // costs less than process_vm_readv's system call and page pinning.
  static constexpr size_t kRemoteReadMinBytes = size_t{1} << 20;

  // Copy receives of at least this size write the destination with streaming (non-temporal)
  // stores: a destination this large would leave the cache before anyone reads it, and ordinary
  // stores would first fetch every line from DRAM and evict the FIFO. Smaller destinations stay
  // cached for the algorithm step that reads them next.
  static constexpr size_t kStreamingCopyMinBytes = size_t{16} << 20;

  // `outgoing` carries this rank's messages to `peer` and `incoming` the reverse; both are
  // validated and attached. `peer_process` watches the peer. `send_by_address`: large messages to
  // the peer may travel by address (the peer probed that it can read this process's memory);
  // `read_by_address`: this rank told the peer it may (it can read the peer's memory).
  ShmLink(int rank, int peer, ShmSegment outgoing, ShmSegment incoming, ProcessWatch peer_process,
          bool send_by_address, bool read_by_address);
  // Marks both directions closed, so a peer still waiting on this link fails at its next check
  // (within about kProcessCheckIntervalNs) instead of at its deadline.
  ~ShmLink() override;

  uint64_t PostSend(const Envelope& envelope, const void* data, size_t bytes) override;
  uint64_t PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) override;
  absl::StatusOr<bool> Progress() override;
  bool SendDone(uint64_t id) const override { return id < sends_done_; }
  bool RecvDone(uint64_t id) const override { return id < recvs_done_; }
  void AddPollFds(std::vector<pollfd>* fds) const override;
  int peer() const override { return peer_; }
  absl::string_view transport_name() const override { return "shm"; }

 private:
  struct PendingSend {
    Envelope envelope;
    const std::byte* data;
    size_t bytes;
    size_t offset = 0;     // payload bytes already in slots
    bool started = false;  // header written
  };
  struct PendingRecv {
    Envelope envelope;
    RecvSink sink;
    size_t bytes;
    size_t offset = 0;            // payload bytes already delivered
    bool started = false;         // header checked
    bool streaming = false;       // copy with StreamingCopy
    uint64_t remote_address = 0;  // non-zero: read the payload from the sender's memory
  };

  bool PumpSends();
  absl::StatusOr<bool> PumpRecvs();
  absl::Status CheckHeader(PendingRecv& recv, const shm::MessageHeader& header) const;
  void Deliver(PendingRecv& recv, const std::byte* src, size_t bytes);
  absl::Status ReadRemote(PendingRecv& recv);
  absl::Status CheckPeerWhileIdle();
  bool WorkPending() const { return !sends_.empty() || !unreleased_.empty() || !recvs_.empty(); }
  absl::Status Error(absl::StatusCode code, absl::string_view what) const;

  const int rank_;
  const int peer_;
  ShmSegment out_segment_;
  ShmSegment in_segment_;
  shm::RingHeader* out_;
  shm::RingHeader* in_;
  std::byte* out_slots_;
  const std::byte* in_slots_;
  ProcessWatch peer_process_;
  const pid_t peer_pid_;
  const bool send_by_address_;
  const bool read_by_address_;

  // Producer side of the outgoing ring.
  uint64_t head_ = 0;       // slots this rank has published
  uint64_t tail_seen_ = 0;  // the receiver's tail as last read (re-read only when it matters)
  std::deque<PendingSend> sends_;
  // For each send whose bytes are all published but which is not done yet, the tail that
  // completes it: a remote-read send is done once the receiver releases its slot. Sends complete
  // in order, so sends that follow one wait here too (with tail 0).
  std::deque<uint64_t> unreleased_;
  uint64_t sends_posted_ = 0;
  uint64_t sends_done_ = 0;

  // Consumer side of the incoming ring.
  uint64_t tail_ = 0;       // slots this rank has released
  uint64_t head_seen_ = 0;  // the sender's head as last read
  std::deque<PendingRecv> recvs_;
  uint64_t recvs_posted_ = 0;
  uint64_t recvs_done_ = 0;
  std::unique_ptr<std::byte[]> stage_;  // remote-read reduce staging, allocated on first use

  // When the peer was last checked during the current idle spell; 0 while data moves.
  int64_t last_check_ns_ = 0;
  absl::Status status_;  // the first error; final
};

}  // namespace weft
