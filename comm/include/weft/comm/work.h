// Work: the handle every communicator call returns.
//
// Operations run asynchronously in issue order. A Work lets the caller overlap computation with
// communication and then collect the result: Test() polls, Wait() blocks up to a timeout. Waiting
// on an operation may run it (and the operations issued before it) on the waiting thread, which is
// how a tight loop of small collectives gets shared-memory latency instead of a thread hand-off.
// Small collectives (up to 16 KiB a rank, or a barrier, between ranks of one host) usually finish
// inside the call that issues them, and their Work is done when handed out.
//
// Copyable; all copies refer to the same operation. A default-constructed Work is finished with
// an error.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace weft {

namespace internal {
struct OpState;
}

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<internal::OpState> state) : state_(std::move(state)) {}
  // A Work that finished successfully before it was handed out: a zero-count call, or a tiny
  // collective that its submitting thread ran at once. Carries no state, costs nothing.
  static Work Succeeded() {
    Work work;
    work.succeeded_ = true;
    return work;
  }

  // True once the operation has finished, successfully or not. Never blocks.
  bool Test() const;

  // Waits until the operation finishes or `timeout` passes. Returns the operation's status, or
  // DeadlineExceeded if the timeout passed first (the operation keeps running; wait again or
  // abort the communicator). The operation's own deadline (WEFT_TIMEOUT) still applies.
  absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) const;

  // The operation's status once Test() is true; Unavailable("still running") before.
  absl::Status status() const;

 private:
  std::shared_ptr<internal::OpState> state_;
  bool succeeded_ = false;  // without state_: finished with OK rather than "empty"
};

}  // namespace weft
