// ShmArena: one shared-memory region mapped by every rank of a communicator on one host.
//
// The shared-memory direct algorithms (all-reduce, reduce-scatter, all-gather, broadcast inside a
// node) read and write each other's areas here instead of passing messages: every local rank owns
// a data area that all local ranks can read, plus a small array of 64-bit progress counters that
// it alone writes and every other rank may wait on. Counters only grow (they carry operation
// sequence numbers), so the arena never needs resetting between operations.
//
// Waiting is tuned for both cases Weft meets: with a core per rank a waiter sees a Publish within
// a cache-line transfer because it starts by spinning, and it yields rather than sleeps for the
// first millisecond (waking a sleeper costs more than the wait); oversubscribed (8 ranks on
// 2 cores) it soon yields and then sleeps on a futex, so it stops stealing the core the publisher
// needs. Publish makes the futex system call only when somebody actually sleeps.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bootstrap/store.h"
#include "deadline.h"
#include "transport/shm/process_watch.h"
#include "transport/shm/shm_segment.h"

namespace weft {

class ShmArena {
 public:
  static constexpr int kCountersPerRank = 16;

  // Collective over `local_ranks` (global ranks on this host, ascending, including `rank`).
  // The lowest of them creates the segment; the others attach. The name is removed from
  // /dev/shm as soon as everyone has attached, so a crash leaks nothing.
  // Each rank's data area is `area_bytes` bytes (rounded up to a page), 64-byte aligned.
  // `store` keys are derived from `unique_name`, so one store can serve several arenas.
  // `oversubscribed`: the local ranks share cores, so waits skip the long yield phase.
  static absl::StatusOr<std::unique_ptr<ShmArena>> Create(Store& store,
                                                          const std::string& unique_name, int rank,
                                                          const std::vector<int>& local_ranks,
                                                          size_t area_bytes, bool oversubscribed,
                                                          const Deadline& deadline);
  ~ShmArena() = default;

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  size_t area_bytes() const { return area_bytes_; }

  // The data area of local rank `r` (0 <= r < local_size()).
  std::byte* area(int r) const;

  // Stores `value` into this rank's counter `index` with release ordering and wakes waiters.
  void Publish(int index, uint64_t value);

  // Each counter shares its cache line with kPayloadBytes of data, so that a waiter that sees the
  // value has the data with the same cache-line transfer: the fastest way to pass a few bytes.
  // PublishWith writes `bytes` (<= kPayloadBytes) of `data` into the line, then publishes.
  static constexpr size_t kPayloadBytes = 48;
  void PublishWith(int index, uint64_t value, const void* data, size_t bytes);
  // Local rank `r`'s payload of counter `index`; valid once its value has been waited for, until
  // the owner publishes again.
  const std::byte* Payload(int r, int index) const;

  // Waits until local rank `r`'s counter `index` is >= `value` (acquire ordering), spinning
  // briefly, then yielding, then sleeping on a futex; fails at the deadline, on abort, or when
  // rank `r`'s process has exited (noticed within about 100 ms).
  absl::Status WaitAtLeast(int r, int index, uint64_t value, const Deadline& deadline) const;

  // Reads local rank `r`'s counter `index` (acquire).
  uint64_t Read(int r, int index) const;

  // Whether every local rank can read every other's memory with process_vm_readv (cross-memory
  // attach), the same answer on all of them; and local rank `r`'s process id for such reads.
  bool remote_read() const { return remote_read_; }
  pid_t pid(int r) const { return pids_[r]; }
  // The global rank of local rank `r`, for messages.
  int global_rank(int r) const { return local_ranks_[r]; }

 private:
  ShmArena() = default;

  struct alignas(64) CounterLine {
    std::atomic<uint64_t> value;
    // Changes whenever a Publish finds sleepers; the futex sleeps on it (futexes are 32-bit).
    std::atomic<uint32_t> futex_word;
    std::atomic<uint32_t> waiters;  // processes inside the futex phase of WaitAtLeast
    std::byte payload[kPayloadBytes];
  };
  static_assert(sizeof(CounterLine) == 64);

  CounterLine* counter(int r, int index) const;
  absl::Status AgreeOnRemoteReads(Store& store, const std::string& key, const Deadline& deadline);

  ShmSegment segment_;
  size_t area_bytes_ = 0;
  size_t counters_offset_ = 0;
  size_t areas_offset_ = 0;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<int> local_ranks_;       // global rank of each local rank, for messages
  std::vector<ProcessWatch> watches_;  // per local rank; watches nothing for this rank
  std::vector<pid_t> pids_;
  bool remote_read_ = false;
  bool oversubscribed_ = false;
};

}  // namespace weft
