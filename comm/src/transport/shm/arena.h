// ShmArena: one shared-memory region mapped by every rank of a communicator on one host.
//
// The shared-memory direct algorithms (all-reduce, reduce-scatter, all-gather, broadcast inside a
// node) read and write each other's areas here instead of passing messages: every local rank owns
// a data area that all local ranks can read, plus a small array of 64-bit progress counters that
// it alone writes and every other rank may wait on. Counters only grow (they carry operation
// sequence numbers), so the arena never needs resetting between operations.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bootstrap/store.h"
#include "deadline.h"

namespace weft {

class ShmArena {
 public:
  static constexpr int kCountersPerRank = 16;

  // Collective over `local_ranks` (global ranks on this host, ascending, including `rank`).
  // The lowest of them creates the segment; the others attach. The name is removed from
  // /dev/shm as soon as everyone has attached, so a crash leaks nothing.
  // Each rank's data area is `area_bytes` bytes (rounded up to a page), 64-byte aligned.
  static absl::StatusOr<std::unique_ptr<ShmArena>> Create(Store& store,
                                                          const std::string& unique_name,
                                                          int rank,
                                                          const std::vector<int>& local_ranks,
                                                          size_t area_bytes,
                                                          const Deadline& deadline);
  ~ShmArena();

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  size_t area_bytes() const { return area_bytes_; }

  // The data area of local rank `r` (0 <= r < local_size()).
  std::byte* area(int r) const;

  // Stores `value` into this rank's counter `index` with release ordering and wakes waiters.
  void Publish(int index, uint64_t value);

  // Waits until local rank `r`'s counter `index` is >= `value` (acquire ordering), spinning
  // briefly, then yielding, then sleeping on a futex; fails at the deadline or on abort.
  absl::Status WaitAtLeast(int r, int index, uint64_t value, const Deadline& deadline) const;

  // Reads local rank `r`'s counter `index` (acquire).
  uint64_t Read(int r, int index) const;

 private:
  ShmArena() = default;

  struct alignas(64) CounterLine {
    std::atomic<uint64_t> value;
    std::atomic<uint32_t> futex_word;  // bumped on every Publish; futex waits on it
    std::atomic<uint32_t> waiters;
  };

  CounterLine* counter(int r, int index) const;

  void* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  size_t area_bytes_ = 0;
  size_t counters_offset_ = 0;
  size_t areas_offset_ = 0;
  int local_rank_ = 0;
  int local_size_ = 1;
};

}  // namespace weft
