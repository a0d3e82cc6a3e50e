// Engine: runs a communicator's operations one after another, in issue order.
//
// Operations are queued by the API calls and executed by whichever thread gets there first:
//  - a tiny operation (Op::Eager) submitted while nothing is queued or running runs on the
//    submitting thread, which then hands out a finished Work: a loop of tiny collectives pays no
//    queue, no shared state and no hand-off. When the peers are late it waits for them a few
//    microseconds at most, then queues the rest of the operation like any other;
//  - a thread that waits on a Work runs the queue up to that operation itself (caller-runs), so a
//    loop of small blocking collectives pays no thread hand-off;
//  - the progress thread runs operations nobody is waiting on, so compute overlaps communication.
// The progress thread leaves the queue alone while the caller is busy with the communicator
// (submitting or waiting within a short grace period): such a caller soon waits and runs the
// operations itself, and a progress thread that took them would only trade the core with it.
//
// The first failure is sticky: later operations fail at once with a message that points to it,
// since links are in an unknown state after a failed collective. Abort() cancels everything.
// A failure is also reported to the other ranks (FaultWatch), whose running operations then end
// with it instead of waiting for their deadline, and every operation is recorded in the flight
// recorder, which is dumped when one fails.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "deadline.h"
#include "fault_watch.h"
#include "flight_recorder.h"
#include "weft/comm/work.h"

namespace weft {

class Engine;

// One queued operation. Run() is called exactly once, on some thread, with the deadline that
// bounds it; it blocks until the operation is complete or failed.
class Op {
 public:
  virtual ~Op() = default;
  virtual absl::Status Run(const Deadline& deadline) = 0;

  // Whether TryEagerly may start this operation: it is tiny, and can begin without waiting.
  virtual bool Eager() const { return false; }
  // Begins the operation without waiting on anybody, or continues it, then gives the peers
  // `window` to catch up: the operation's status once it is complete, or nullopt when it is not,
  // and TryEagerly or Run finishes it later from where it got. `deadline` bounds what Run would.
  virtual std::optional<absl::Status> TryEagerly(const Deadline& /*deadline*/,
                                                 absl::Duration /*window*/) {
    return std::nullopt;
  }

  // "all_reduce #12 (ring, 1024 x float sum)": prefixes error messages.
  virtual std::string Describe() const = 0;
  // The same for the flight recorder: no formatting, it runs for every operation.
  virtual OpSummary Summarize() const = 0;
};

namespace internal {

struct OpState {
  std::unique_ptr<Op> op;        // released once run
  std::weak_ptr<Engine> engine;  // for caller-runs; expired once the engine is gone
  uint64_t record = 0;           // FlightRecorder id
  bool started = false;          // recorded as started (by an eager attempt)
  std::atomic<bool> done{false};
  absl::Status status;  // written before `done` becomes true
};

}  // namespace internal

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  // `describe_rank` ("rank 3") prefixes every error.
  // `oversubscribed`: the communicator's ranks share cores, so waits yield instead of spinning
  // (Backoff) and nothing runs eagerly.
  static std::shared_ptr<Engine> Start(std::string describe_rank, absl::Duration op_timeout,
                                       bool oversubscribed);
  ~Engine();

  // Queues `op` (or runs it at once, see Op::Eager). `state` lets a group hand out its Work
  // before the group is submitted. Callers serialize Submit (the communicator's issue lock), so
  // that operations run in the order they are numbered.
  Work Submit(std::unique_ptr<Op> op, std::shared_ptr<internal::OpState> state = nullptr);
  // The same for an operation on the caller's stack: one that completes eagerly never reaches
  // the heap (a loop of tiny collectives allocates nothing); otherwise `to_heap` moves it there.
  Work Submit(Op& op, absl::FunctionRef<std::unique_ptr<Op>()> to_heap);

  // A handle for an operation that will be submitted later with Submit(op, state).
  static std::shared_ptr<internal::OpState> NewState();

  // A Work that is already finished with `status` (argument errors).
  static Work Finished(absl::Status status);

  // Blocks until `op` is done or `timeout` passes, running queued operations on this thread
  // when nobody else is. Used by Work::Wait.
  absl::Status WaitFor(internal::OpState& op, absl::Duration timeout);

  // Fails all pending and future operations with Cancelled; a running one ends at its next
  // wait. Bounded: never waits for the running operation.
  void Abort();

  // Runs what is queued (each bounded by its deadline), then stops the progress thread.
  void Shutdown();

  const std::atomic<bool>* abort_flag() const { return &aborted_; }
  absl::Duration op_timeout() const { return op_timeout_; }

  // The record of this communicator's last operations. Set its identity before the first
  // operation (and before Attach).
  FlightRecorder& recorder() { return recorder_; }
  // Connects the engine to the other ranks' failures: from now on a failed operation is reported
  // to them, and their reports (FaultWatch::Callbacks::on_fault -> OnPeerFault) end this rank's
  // operations. Called once, before the first operation.
  void Attach(std::unique_ptr<FaultWatch> watch) { watch_ = std::move(watch); }
  // Another rank failed with `report`: ends the running operation (its error quotes the report),
  // fails every later one, and dumps the flight recorder.
  void OnPeerFault(const std::string& report);
  // Writes the flight recorder (see FlightRecorder::Dump); returns the file's path.
  absl::StatusOr<std::string> DumpRecorder(absl::string_view reason) const {
    return recorder_.Dump(reason);
  }

 private:
  Engine(std::string describe_rank, absl::Duration op_timeout, bool oversubscribed)
      : describe_rank_(std::move(describe_rank)),
        op_timeout_(op_timeout),
        oversubscribed_(oversubscribed),
        recorder_(FlightRecorder::CapacityFromEnvironment()) {}

  // With exec_mu_ held: runs queued operations in order until `until` is done (nullptr: until
  // the queue is empty).
  void RunQueued(const internal::OpState* until);
  void Execute(internal::OpState& state);
  // With exec_mu_ held, on the submitting thread: runs `op` at once if the queue is empty (or
  // drains its eager head first) and it completes within the eager window. Returns its finished
  // Work, or nullopt with `op` untouched; an op begun but not finished is moved to the heap
  // (`to_heap`) and queued (its Work returned) so that whoever runs the queue next finishes it
  // first.
  std::optional<Work> SubmitEagerly(Op& op, absl::FunctionRef<std::unique_ptr<Op>()> to_heap);
  // Whether Submit may try `op` eagerly.
  bool MayRunEagerly(const Op& op) const;
  // Submit's queueing half: records `op` and queues it behind the others (with `state`, or a new
  // one).
  Work Queue(std::unique_ptr<Op> op, std::shared_ptr<internal::OpState> state);
  // With exec_mu_ held: completes queued eager operations at the head of the queue while they
  // finish within the window; true if the queue is then empty.
  bool DrainEagerHead();
  // How long an eager attempt waits for the peers (see kEagerWindow).
  absl::Duration EagerWindow() const;
  // With mu_ held: queues `state` at the back (or, for an eager operation begun but not
  // finished, at the head) and wakes the progress thread if it sleeps.
  void Enqueue(std::shared_ptr<internal::OpState> state, bool at_head);
  // Records an operation's start in the flight recorder, unless an eager attempt did.
  void MarkStarted(internal::OpState& state);
  // Records the end of an operation in the flight recorder, then finishes its Work.
  void Complete(internal::OpState& state, absl::Status status);
  // The error of an operation whose Run failed with `cause`: names this rank, the operation and
  // the processes that have exited; dumps the recorder, makes the error sticky and reports it to
  // the other ranks. Records the failure (Complete must not record it again).
  absl::Status Failed(internal::OpState& state, const absl::Status& cause);
  void ProgressLoop();
  static void Finish(internal::OpState& state, absl::Status status);

  const std::string describe_rank_;
  const absl::Duration op_timeout_;
  const bool oversubscribed_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> stop_{false};    // ends the running operation's waits: abort or a peer's fault
  std::atomic<bool> failed_{false};  // sticky_error_ is set: spares the lock on the fast path
  std::atomic<int> inline_waiters_{0};  // callers in WaitFor that may run the queue themselves
  // Counts Submit and Wait calls: the progress thread stays away until it has seen no change
  // for a grace period. A plain load and store (no read-modify-write) is enough: the value only
  // has to change, and it costs the caller nothing.
  std::atomic<uint64_t> caller_activity_{0};
  void NoteCallerActivity() {
    caller_activity_.store(caller_activity_.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  }

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer.
  std::mutex mu_;
  std::deque<std::shared_ptr<internal::OpState>> queue_;  // guarded by mu_
  absl::Status sticky_error_;                             // guarded by mu_
  std::string peer_fault_;  // guarded by mu_: the first failure another rank reported
  // queue_.size(), readable without mu_: the progress thread polls it without contending with
  // the caller for mu_.
  std::atomic<size_t> queued_{0};

  // The progress thread sleeps on wake_ under its own mutex, for the same reason.
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> progress_idle_{false};  // asleep until the next Submit

  std::mutex exec_mu_;  // held by the thread that is executing operations
  std::thread progress_thread_;
  FlightRecorder recorder_;
  // Last: destroyed first, so its thread never calls into a half-destroyed engine.
  std::unique_ptr<FaultWatch> watch_;
};

}  // namespace weft
