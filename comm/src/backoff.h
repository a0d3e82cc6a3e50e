// Backoff: how a thread that has nothing to do but wait for a peer spends its time.
//
// Collectives on shared memory answer in well under a microsecond when both ranks are running, so
// waiting starts by spinning, then yields. Ranks are often oversubscribed (8 ranks on 2 cores),
// where spinning steals the very core the peer needs, so there the wait skips the spin, yields
// only briefly, and sleeps, in sleeps that grow from 50 us to a cap. Waiters that own sockets pass
// them in and sleep in ppoll() instead, which wakes the moment data arrives.
#pragma once

#include <poll.h>

#include <cstdint>
#include <vector>

namespace weft {

// One spin-wait step: tells the core a spin loop runs, which saves power and lets a sibling
// hyperthread progress.
inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Backoff {
 public:
  // `oversubscribed`: this communicator's host runs more ranks than they have cores, so
  // spinning only delays the peer that would end the wait; waits start by yielding instead, and
  // sleep sooner.
  explicit Backoff(bool oversubscribed = false);

  // Call after every round that made progress: the next wait starts with spinning again.
  void Reset() { idle_rounds_ = 0; }

  // Call after a round that made no progress. `fds` (may be empty) are polled during the sleep
  // phase; the sleep never exceeds `max_sleep_ms` so the caller re-checks its deadline often.
  void Pause(std::vector<pollfd>* fds = nullptr, int max_sleep_ms = 10);

 private:
  const uint32_t spin_rounds_;
  const uint32_t yield_rounds_;
  uint32_t idle_rounds_ = 0;
};

}  // namespace weft
