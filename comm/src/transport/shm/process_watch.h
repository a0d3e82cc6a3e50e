// ProcessWatch: notices that another process on this host has exited.
//
// Shared memory has no connection to break when a peer dies, so a rank waiting on a dead peer
// would otherwise wait until its deadline. Waiters call Exited() when they have been idle for a
// while (it is a system call, so never on the fast path). A pidfd is used where the kernel has
// them: it names exactly one process, so a recycled pid is never mistaken for the peer, it reports
// an exited but not yet reaped (zombie) process as exited, and it can be poll()ed, so idle waiters
// wake the moment the peer dies. Older kernels fall back to kill(pid, 0).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>

namespace weft {

class ProcessWatch {
 public:
  // Watches nothing: Exited() is always false. Used when the peer's pid means nothing here.
  ProcessWatch() = default;
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  ~ProcessWatch();

  // Watches process `pid`, which must live in this process's pid namespace (compare
  // PidNamespaceId() first: in another namespace the number names a different process).
  static ProcessWatch Open(pid_t pid);

  // Whether the process has exited. A system call: call it only when idle.
  bool Exited() const;

  // A descriptor that polls readable (POLLIN) once the process has exited, or -1.
  int fd() const { return fd_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int fd_ = -1;
  bool use_kill_ = false;      // no pidfd on this kernel
  bool gone_at_open_ = false;  // the process had already exited when the watch was opened
};

// Identifies this process's pid namespace (e.g. "pid:[4026531836]"), or "" when unknown. Pids
// are comparable between two processes only when both return the same non-empty id.
std::string PidNamespaceId();

// How often an idle waiter asks Exited(): a dead peer is reported within about this long, and the
// system call costs nothing measurable at this rate.
inline constexpr int64_t kProcessCheckIntervalNs = 100'000'000;

// A clock cheap enough to read on every idle round (vDSO, no system call; millisecond
// resolution), for deciding when kProcessCheckIntervalNs has passed.
inline int64_t CoarseMonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace weft
