// Deadline: the bound on every wait in Weft.
//
// A Deadline carries an absolute time and, optionally, the communicator's abort flag, so a wait
// loop asks one object "may I keep waiting?" and gets a Status that says why not. No code in Weft
// waits without one.
#pragma once

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace weft {

class Deadline {
 public:
  // A deadline `timeout` from now. absl::InfiniteDuration() never expires (only abort ends it).
  static Deadline In(absl::Duration timeout, const std::atomic<bool>* aborted = nullptr) {
    return Deadline(absl::Now() + timeout, aborted);
  }
  // Like In(), from a clock that costs a few nanoseconds to read but lags by up to a few
  // milliseconds, so the deadline may come that much early: for the deadline of every operation,
  // which a loop of small collectives sets millions of times a second.
  static Deadline InCoarse(absl::Duration timeout, const std::atomic<bool>* aborted = nullptr);
  static Deadline At(absl::Time when, const std::atomic<bool>* aborted = nullptr) {
    return Deadline(when, aborted);
  }

  absl::Time when() const { return when_; }
  const std::atomic<bool>* abort_flag() const { return aborted_; }
  absl::Duration Remaining() const { return when_ - absl::Now(); }

  bool Aborted() const { return aborted_ != nullptr && aborted_->load(std::memory_order_relaxed); }
  bool Expired() const { return absl::Now() >= when_; }

  // OkStatus while waiting may go on; otherwise DeadlineExceeded or Cancelled (abort), with
  // `what` (e.g. "rank 2 all_reduce #17: receive from rank 1") leading the message.
  absl::Status Check(absl::string_view what) const;

  // Milliseconds to pass to poll(): the time left, capped at `cap_ms`, never negative.
  int PollTimeoutMs(int cap_ms) const;

  // The earlier of the two; keeps this deadline's abort flag.
  Deadline Min(absl::Time other) const { return Deadline(std::min(when_, other), aborted_); }

 private:
  Deadline(absl::Time when, const std::atomic<bool>* aborted) : when_(when), aborted_(aborted) {}

  absl::Time when_;
  const std::atomic<bool>* aborted_;
};

}  // namespace weft
