// -T: a bound on the whole run. When it passes, the watchdog aborts the communicators, so every
// wait in the run ends at once with an error the tool reports ("# error: ...") before it exits
// non-zero. If the run has still not ended a grace period later (it was not waiting on the
// communicator, or had none yet), the watchdog prints the error itself and exits the process.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "weft/comm/communicator.h"

namespace weft::perf {

class Watchdog {
 public:
  // Exit status when the bound passes (nccl-tests' testTimeout).
  static constexpr int kExitCode = 4;

  // `seconds` = 0: no bound, no thread.
  explicit Watchdog(int seconds, absl::Duration grace = absl::Seconds(3));
  // Stops the thread; call Watch(nullptr) first if a communicator is watched.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The communicators to abort when the bound passes (none, e.g. before destroying them). If the
  // bound has already passed, they are aborted at once.
  void Watch(std::vector<Communicator*> comms);

  bool expired() const;
  // "the run exceeded -T 5 s"
  std::string Message() const;

 private:
  void Run();

  const int seconds_;
  const absl::Duration grace_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool expired_ = false;
  std::vector<Communicator*> comms_;
  std::thread thread_;
};

}  // namespace weft::perf
