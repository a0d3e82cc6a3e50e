#include "transport/shm/shm_link.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/shm/streaming_copy.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

// Per Progress() call each direction moves at most one ring's worth of slots, so a long message
// in one direction cannot starve the other (both ranks may be sending to each other at once).
constexpr uint32_t kSlotsPerProgress = shm::kSlotCount;
// Likewise, a remote read copies at most this much per call.
constexpr size_t kRemoteReadPerProgress = size_t{4} << 20;
// A reduce receive by remote read stages this much at a time: small enough to stay in L2, so the
// reduction reads it from cache.
constexpr size_t kStageBytes = size_t{256} << 10;
static_assert(kStageBytes % 64 == 0);

shm::RingHeader* HeaderOf(const ShmSegment& segment) {
  return std::launder(reinterpret_cast<shm::RingHeader*>(segment.data()));
}

}  // namespace

ShmLink::ShmLink(int rank, int peer, ShmSegment outgoing, ShmSegment incoming,
                 ProcessWatch peer_process, bool send_by_address, bool read_by_address)
    : rank_(rank),
      peer_(peer),
      out_segment_(std::move(outgoing)),
      in_segment_(std::move(incoming)),
      out_(HeaderOf(out_segment_)),
      in_(HeaderOf(in_segment_)),
      out_slots_(out_segment_.data() + shm::kSlotsOffset),
      in_slots_(in_segment_.data() + shm::kSlotsOffset),
      peer_process_(std::move(peer_process)),
      peer_pid_(out_->receiver_pid),
      send_by_address_(send_by_address),
      read_by_address_(read_by_address) {}

ShmLink::~ShmLink() {
  out_->sender_closed.store(1, std::memory_order_release);
  in_->receiver_closed.store(1, std::memory_order_release);
}

uint64_t ShmLink::PostSend(const Envelope& envelope, const void* data, size_t bytes) {
  sends_.push_back(PendingSend{envelope, static_cast<const std::byte*>(data), bytes});
  return sends_posted_++;
}

uint64_t ShmLink::PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) {
  recvs_.push_back(PendingRecv{envelope, sink, bytes});
  return recvs_posted_++;
}

void ShmLink::AddPollFds(std::vector<pollfd>* fds) const {
  // Data arrival has no descriptor; the peer's exit does, so an idle poller wakes for it.
  if (peer_process_.fd() >= 0) fds->push_back(pollfd{peer_process_.fd(), POLLIN, 0});
}

absl::Status ShmLink::Error(absl::StatusCode code, absl::string_view what) const {
  return absl::Status(
      code, absl::StrCat("rank ", rank_, ": shared-memory link with rank ", peer_, ": ", what));
}

absl::StatusOr<bool> ShmLink::Progress() {
  if (!status_.ok()) return status_;
  bool moved = false;
  if (!sends_.empty() || !unreleased_.empty()) moved = PumpSends();
  if (!recvs_.empty()) {
    absl::StatusOr<bool> received = PumpRecvs();
    if (!received.ok()) {
      status_ = received.status();
      return status_;
    }
    moved = moved || *received;
  }
  if (moved) {
    last_check_ns_ = 0;
    return true;
  }
  if (WorkPending()) {
    if (absl::Status s = CheckPeerWhileIdle(); !s.ok()) {
      status_ = s;
      return status_;
    }
  }
  return false;
}

bool ShmLink::PumpSends() {
  bool moved = false;
  uint32_t budget = kSlotsPerProgress;
  while (!sends_.empty() && budget > 0) {
    PendingSend& send = sends_.front();
    if (head_ - tail_seen_ == shm::kSlotCount) {
      tail_seen_ = out_->tail.load(std::memory_order_acquire);
      if (head_ - tail_seen_ == shm::kSlotCount) break;
    }
    std::byte* slot = out_slots_ + (head_ % shm::kSlotCount) * shm::kSlotBytes;
    size_t room = shm::kSlotBytes;
    bool remote = false;
    if (!send.started) {
      remote = send_by_address_ && send.bytes >= kRemoteReadMinBytes;
      shm::MessageHeader header{};
      header.bytes = send.bytes;
      header.envelope = send.envelope;
      header.kind = remote ? shm::PayloadKind::kRemoteRead : shm::PayloadKind::kInline;
      header.remote_address = remote ? reinterpret_cast<uintptr_t>(send.data) : 0;
      std::memcpy(slot, &header, sizeof(header));
      send.started = true;
      slot += shm::kMessageHeaderBytes;
      room = shm::kFirstSlotPayload;
    }
    if (!remote) {
      const size_t n = std::min(room, send.bytes - send.offset);
      if (n > 0) std::memcpy(slot, send.data + send.offset, n);
      send.offset += n;
    }
    ++head_;
    out_->head.store(head_, std::memory_order_release);
    --budget;
    moved = true;
    if (remote) {
      // The receiver reads the buffer in place: the send is done when it releases this slot.
      unreleased_.push_back(head_);
      sends_.pop_front();
    } else if (send.offset == send.bytes) {
      if (unreleased_.empty()) {
        ++sends_done_;
      } else {
        unreleased_.push_back(0);
      }
      sends_.pop_front();
    }
  }
  while (!unreleased_.empty()) {
    if (unreleased_.front() > tail_seen_) {
      tail_seen_ = out_->tail.load(std::memory_order_acquire);
      if (unreleased_.front() > tail_seen_) break;
    }
    unreleased_.pop_front();
    ++sends_done_;
    moved = true;
  }
  return moved;
}

absl::Status ShmLink::CheckHeader(PendingRecv& recv, const shm::MessageHeader& header) const {
  if (header.envelope != recv.envelope || header.bytes != recv.bytes) {
    const absl::Status mismatch =
        EnvelopeMismatch(recv.envelope, recv.bytes, header.envelope, header.bytes);
    return Error(mismatch.code(), absl::StrCat("receive: ", mismatch.message()));
  }
  const bool remote_ok = header.kind == shm::PayloadKind::kRemoteRead &&
                         header.remote_address != 0 && read_by_address_;
  if (header.kind != shm::PayloadKind::kInline && !remote_ok) {
    return Error(absl::StatusCode::kDataLoss,
                 absl::StrCat("receive: message header has payload kind ",
                              static_cast<uint32_t>(header.kind), ", address 0x",
                              absl::Hex(header.remote_address),
                              ", which this end did not agree to (shared memory overwritten, or "
                              "mismatched Weft builds)"));
  }
  if (recv.sink.mode == RecvSink::Mode::kReduce) {
    const size_t element = SizeOf(recv.sink.dtype);
    if (element == 0 || !IsValid(recv.sink.op) || recv.bytes % element != 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("reduce receive of ", recv.bytes, " bytes with data type ",
                                static_cast<int>(recv.sink.dtype), " and operator ",
                                static_cast<int>(recv.sink.op),
                                ": the size must be a whole number of valid elements"));
    }
  }
  return absl::OkStatus();
}

void ShmLink::Deliver(PendingRecv& recv, const std::byte* src, size_t bytes) {
  if (bytes == 0) return;
  std::byte* dst = static_cast<std::byte*>(recv.sink.dst) + recv.offset;
  if (recv.streaming) {
    StreamingCopy(dst, src, bytes);
    if (recv.offset + bytes == recv.bytes) StreamingCopyDone();
  } else if (recv.sink.mode == RecvSink::Mode::kCopy) {
    std::memcpy(dst, src, bytes);
  } else {
    recv.sink.ReduceArrived(recv.offset, src, bytes / SizeOf(recv.sink.dtype));
  }
  recv.offset += bytes;
}

absl::StatusOr<bool> ShmLink::PumpRecvs() {
  bool moved = false;
  uint32_t budget = kSlotsPerProgress;
  while (!recvs_.empty() && budget > 0) {
    PendingRecv& recv = recvs_.front();
    if (recv.remote_address != 0) {
      if (absl::Status s = ReadRemote(recv); !s.ok()) return s;
      moved = true;
      if (recv.offset < recv.bytes) break;  // the rest in later calls; let sends move meanwhile
      ++tail_;
      in_->tail.store(tail_, std::memory_order_release);
      --budget;
      recvs_.pop_front();
      ++recvs_done_;
      continue;
    }
    if (tail_ == head_seen_) {
      head_seen_ = in_->head.load(std::memory_order_acquire);
      if (tail_ == head_seen_) break;
    }
    const std::byte* slot = in_slots_ + (tail_ % shm::kSlotCount) * shm::kSlotBytes;
    size_t room = shm::kSlotBytes;
    if (!recv.started) {
      shm::MessageHeader header;
      std::memcpy(&header, slot, sizeof(header));
      if (absl::Status s = CheckHeader(recv, header); !s.ok()) return s;
      recv.started = true;
      recv.streaming =
          recv.sink.mode == RecvSink::Mode::kCopy && recv.bytes >= kStreamingCopyMinBytes;
      if (header.kind == shm::PayloadKind::kRemoteRead && header.bytes > 0) {
        recv.remote_address = header.remote_address;
        continue;
      }
      slot += shm::kMessageHeaderBytes;
      room = shm::kFirstSlotPayload;
    }
    Deliver(recv, slot, std::min(room, recv.bytes - recv.offset));
    ++tail_;
    in_->tail.store(tail_, std::memory_order_release);
    --budget;
    moved = true;
    if (recv.offset == recv.bytes) {
      recvs_.pop_front();
      ++recvs_done_;
    }
  }
  return moved;
}

absl::Status ShmLink::ReadRemote(PendingRecv& recv) {
  const bool reduce = recv.sink.mode == RecvSink::Mode::kReduce;
  if (reduce && stage_ == nullptr) {
    stage_.reset(new std::byte[kStageBytes]);
  }
  size_t budget = kRemoteReadPerProgress;
  while (budget > 0 && recv.offset < recv.bytes) {
    const size_t want = std::min({budget, recv.bytes - recv.offset, reduce ? kStageBytes : budget});
    void* into = reduce ? static_cast<void*>(stage_.get())
                        : static_cast<std::byte*>(recv.sink.dst) + recv.offset;
    iovec local{into, want};
    iovec remote{reinterpret_cast<void*>(recv.remote_address + recv.offset), want};
    const ssize_t got = process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 || (reduce && static_cast<size_t>(got) != want) || got == 0) {
      const int error = got < 0 ? errno : EFAULT;
      if (error == ESRCH) {
        return Error(absl::StatusCode::kUnavailable,
                     absl::StrCat("rank ", peer_, " (pid ", peer_pid_,
                                  ") exited while this rank was reading a ", recv.bytes,
                                  "-byte message from its memory"));
      }
      return Error(error == EFAULT ? absl::StatusCode::kDataLoss : absl::StatusCode::kUnavailable,
                   absl::StrFormat("process_vm_readv of %d bytes at offset %d of rank %d's "
                                   "buffer 0x%x: %s%s",
                                   want, recv.offset, peer_, recv.remote_address, strerror(error),
                                   error == EFAULT ? " (did the sender free or change its buffer "
                                                     "before the send completed?)"
                                                   : ""));
    }
    if (reduce) {
      recv.sink.ReduceArrived(recv.offset, stage_.get(), want / SizeOf(recv.sink.dtype));
    }
    recv.offset += static_cast<size_t>(got);
    budget -= static_cast<size_t>(got);
  }
  // The sender closes its end before it may free its buffers; a close seen after the read means
  // the bytes may already have been stale.
  if (recv.offset == recv.bytes && in_->sender_closed.load(std::memory_order_acquire) != 0) {
    return Error(absl::StatusCode::kUnavailable,
                 absl::StrCat("rank ", peer_, " closed its end of the link while this rank read a ",
                              recv.bytes, "-byte message from its memory"));
  }
  return absl::OkStatus();
}

absl::Status ShmLink::CheckPeerWhileIdle() {
  const int64_t now = CoarseMonotonicNs();
  if (last_check_ns_ == 0) {
    last_check_ns_ = now;
    return absl::OkStatus();
  }
  if (now - last_check_ns_ < kProcessCheckIntervalNs) return absl::OkStatus();
  last_check_ns_ = now;
  const bool exited = peer_process_.Exited();
  const bool closed = in_->sender_closed.load(std::memory_order_acquire) != 0 ||
                      out_->receiver_closed.load(std::memory_order_acquire) != 0;
  if (!exited && !closed) return absl::OkStatus();
  // The peer may have published its last messages (or released our slots) just before it went;
  // those still count, and the next Progress() will move them.
  const bool can_receive = !recvs_.empty() && in_->head.load(std::memory_order_acquire) != tail_;
  const bool can_send = (!sends_.empty() || !unreleased_.empty()) &&
                        out_->tail.load(std::memory_order_acquire) != tail_seen_;
  if (can_receive || can_send) return absl::OkStatus();
  const std::string pending = absl::StrCat(sends_.size() + unreleased_.size(), " send(s) and ",
                                           recvs_.size(), " receive(s) pending");
  if (exited) {
    return Error(absl::StatusCode::kUnavailable,
                 absl::StrCat("rank ", peer_, " (pid ", peer_pid_, ") exited with ", pending));
  }
  return Error(absl::StatusCode::kUnavailable,
               absl::StrCat("rank ", peer_,
                            " closed its end of the link (communicator destroyed or aborted) with ",
                            pending));
}

}  // namespace weft
