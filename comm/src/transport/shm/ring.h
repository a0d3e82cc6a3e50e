// The memory layout of one directed shared-memory FIFO (sender -> receiver): a header, the two
// counters, and a ring of fixed-size slots. The receiver creates the segment; the sender attaches.
//
// A message occupies whole slots: the first starts with a 64-byte MessageHeader, the payload
// follows and continues in as many further slots as it needs. The sender publishes slots by
// advancing `head`, the receiver returns them by advancing `tail`; each counter has one writer
// and sits on its own pair of cache lines (the adjacent-line prefetcher fetches lines in pairs),
// so the two processes never contend for a line they both write.
//
// Sizes. Slots are 128 KiB: copying one takes ~10 us, which amortises the counter handshake (a
// few hundred ns) to nothing, while 8 of them (1 MiB per direction) let the sender run well ahead
// of the receiver and still fit the L2 of one core plus the shared L3, so the receiver reads what
// the sender just wrote from cache rather than from DRAM. Every slot's payload (the first slot's
// included) is a multiple of 64 bytes, so a receive-reduce never splits an element.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/link.h"

namespace weft::shm {

inline constexpr uint64_t kRingMagic = 0x57454654'52494e47ull;  // "WEFTRING"
inline constexpr uint32_t kRingVersion = 1;
inline constexpr size_t kSlotBytes = size_t{128} << 10;
inline constexpr uint32_t kSlotCount = 8;
inline constexpr size_t kMessageHeaderBytes = 64;
inline constexpr size_t kFirstSlotPayload = kSlotBytes - kMessageHeaderBytes;

static_assert(kSlotBytes % 64 == 0 && kFirstSlotPayload % 64 == 0,
              "slot payloads must hold whole elements of every data type");
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "counters in shared memory must be address-free");

struct RingHeader {
  // Written by the receiver before it publishes the segment's name; read-only afterwards.
  std::atomic<uint64_t> magic;  // stored last, with release
  uint32_t version;
  uint32_t slot_count;
  uint64_t slot_bytes;
  uint64_t segment_bytes;
  uint64_t token_hash;  // Fnv1a(ConnectContext::token): both ends belong to the same job
  int32_t sender_rank;
  int32_t receiver_rank;
  int32_t receiver_pid;

  // Set by the receiver during Connect, before it reports being attached, when it can read the
  // sender's memory with process_vm_readv: the sender may then pass large messages by address.
  alignas(64) std::atomic<uint32_t> receiver_reads_sender;
  // Set when the side's Link is destroyed: the other side stops waiting for it.
  std::atomic<uint32_t> sender_closed;
  std::atomic<uint32_t> receiver_closed;

  alignas(128) std::atomic<uint64_t> head;  // slots published by the sender
  alignas(128) std::atomic<uint64_t> tail;  // slots released by the receiver
};

// Slots start on a page so payload copies run on aligned memory.
inline constexpr size_t kSlotsOffset = 4096;
inline constexpr size_t kRingSegmentBytes = kSlotsOffset + kSlotBytes * kSlotCount;
static_assert(sizeof(RingHeader) <= kSlotsOffset);

// How the message's payload travels.
enum class PayloadKind : uint32_t {
  kInline = 1,      // in the slots, after this header
  kRemoteRead = 2,  // in the sender's memory at `remote_address`; the receiver reads it with
                    // process_vm_readv and releasing the slot tells the sender it is done
};

struct MessageHeader {
  uint64_t bytes;
  Envelope envelope;
  PayloadKind kind;
  uint32_t reserved;
  uint64_t remote_address;
  uint64_t reserved2;
};
static_assert(sizeof(MessageHeader) == kMessageHeaderBytes);

}  // namespace weft::shm
