#include "engine.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backoff.h"

namespace weft {
namespace {

// How long the caller must have left the communicator alone before the progress thread runs
// what it queued. While the caller stays busy with it (a loop of blocking calls, a benchmark
// issuing back to back), the progress thread looks twice as seldom each time, up to
// kBusyPollMax: its wake-ups would take turns with the caller on the caller's core.
constexpr absl::Duration kCallerGrace = absl::Microseconds(50);
constexpr absl::Duration kBusyPollMax = absl::Milliseconds(1);
// While operations keep coming, the progress thread looks at the queue this often...
constexpr absl::Duration kActivePoll = absl::Microseconds(200);
// ...and after this long without any, it sleeps until the next submission wakes it.
constexpr absl::Duration kIdleAfter = absl::Milliseconds(20);
// How long a rank whose collective was mismatched waits for the other ranks to say what they
// called: they answer as soon as the report reaches them, so only a dead or stuck rank makes it
// wait this long.
constexpr absl::Duration kCompareCallsWait = absl::Seconds(2);
// How long an eager operation waits on the submitting thread for its peers: ranks in step answer
// within a few cache-line transfers; late peers cost the submitter no more than this per
// operation.
constexpr absl::Duration kEagerWindow = absl::Microseconds(5);

// "all_reduce(count=4096, float, sum)": what the ranks compare after a mismatch.
std::string DescribeCall(const OpSummary& op) {
  std::string call = absl::StrCat(op.name, "(count=", op.count);
  if (*op.dtype != '\0') absl::StrAppend(&call, ", ", op.dtype);
  if (*op.reduce_op != '\0') absl::StrAppend(&call, ", ", op.reduce_op);
  if (op.root >= 0) absl::StrAppend(&call, ", root=", op.root);
  return call + ")";
}

// The status of a Work without state.
absl::Status Empty(bool succeeded) {
  return succeeded ? absl::OkStatus() : absl::FailedPreconditionError("empty Work handle");
}

}  // namespace

bool Work::Test() const {
  return state_ == nullptr || state_->done.load(std::memory_order_acquire);
}

absl::Status Work::status() const {
  if (state_ == nullptr) return Empty(succeeded_);
  if (!Test()) return absl::UnavailableError("operation still running");
  return state_->status;
}

absl::Status Work::Wait(absl::Duration timeout) const {
  if (state_ == nullptr) return Empty(succeeded_);
  if (Test()) return state_->status;
  if (std::shared_ptr<Engine> engine = state_->engine.lock()) {
    return engine->WaitFor(*state_, timeout);
  }
  // The engine is gone, so its shutdown finished the operation or is finishing it now.
  const absl::Time give_up = absl::Now() + timeout;
  Backoff backoff;
  while (!Test()) {
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError("Work::Wait: timed out; the operation is still running");
    }
    backoff.Pause(nullptr, 1);
  }
  return state_->status;
}

std::shared_ptr<Engine> Engine::Start(std::string describe_rank, absl::Duration op_timeout,
                                      bool oversubscribed) {
  std::shared_ptr<Engine> engine(new Engine(std::move(describe_rank), op_timeout, oversubscribed));
  engine->progress_thread_ = std::thread([raw = engine.get()] { raw->ProgressLoop(); });
  return engine;
}

Engine::~Engine() { Shutdown(); }

Work Engine::Finished(absl::Status status) {
  if (status.ok()) return Work::Succeeded();
  auto state = std::make_shared<internal::OpState>();
  Finish(*state, std::move(status));
  return Work(std::move(state));
}

void Engine::Finish(internal::OpState& state, absl::Status status) {
  state.op.reset();
  state.status = std::move(status);
  state.done.store(true, std::memory_order_release);
}

std::shared_ptr<internal::OpState> Engine::NewState() {
  return std::make_shared<internal::OpState>();
}

bool Engine::MayRunEagerly(const Op& op) const {
  return op.Eager() && !failed_.load(std::memory_order_acquire) &&
         !aborted_.load(std::memory_order_relaxed);
}

Work Engine::Submit(Op& op, absl::FunctionRef<std::unique_ptr<Op>()> to_heap) {
  NoteCallerActivity();
  if (MayRunEagerly(op) && exec_mu_.try_lock()) {
    std::optional<Work> work = SubmitEagerly(op, to_heap);
    exec_mu_.unlock();
    if (work) return *std::move(work);
  }
  return Queue(to_heap(), nullptr);
}

Work Engine::Submit(std::unique_ptr<Op> op, std::shared_ptr<internal::OpState> state) {
  if (state == nullptr) {
    Op& ref = *op;
    return Submit(ref, [&] { return std::move(op); });
  }
  NoteCallerActivity();
  return Queue(std::move(op), std::move(state));
}

Work Engine::Queue(std::unique_ptr<Op> op, std::shared_ptr<internal::OpState> state) {
  if (state == nullptr) state = NewState();
  state->op = std::move(op);
  state->engine = weak_from_this();
  std::lock_guard<std::mutex> lock(mu_);
  state->record = recorder_.Queued(state->op->Summarize());
  if (aborted_.load()) {
    Complete(*state, absl::CancelledError(absl::StrCat(describe_rank_, ": ", state->op->Describe(),
                                                       ": communicator was aborted")));
    return Work(std::move(state));
  }
  Enqueue(state, /*at_head=*/false);
  return Work(std::move(state));
}

void Engine::Enqueue(std::shared_ptr<internal::OpState> state, bool at_head) {
  if (at_head) {
    queue_.push_front(std::move(state));
  } else {
    queue_.push_back(std::move(state));
  }
  queued_.fetch_add(1);
  // Sequentially consistent with the progress thread's store of progress_idle_ and its load of
  // queued_: either it sees this operation before sleeping or this sees it asleep.
  if (progress_idle_.load()) {
    std::lock_guard<std::mutex> sleep(sleep_mu_);
    wake_.notify_one();
  }
}

absl::Duration Engine::EagerWindow() const {
  // Ranks that share cores get none: a peer cannot catch up while this rank spins on its core.
  return oversubscribed_ ? absl::ZeroDuration() : kEagerWindow;
}

std::optional<Work> Engine::SubmitEagerly(Op& op,
                                          absl::FunctionRef<std::unique_ptr<Op>()> to_heap) {
  if (queued_.load(std::memory_order_relaxed) > 0 && !DrainEagerHead()) return std::nullopt;
  const int64_t start = FlightRecorder::Ticks();
  std::optional<absl::Status> status =
      op.TryEagerly(Deadline::InCoarse(op_timeout_, &stop_), EagerWindow());
  if (status && status->ok()) {
    recorder_.Succeeded(op.Summarize(), start);
    return Work::Succeeded();
  }
  auto state = NewState();
  state->record = recorder_.Running(op.Summarize(), start);
  state->op = to_heap();
  state->engine = weak_from_this();
  state->started = true;
  if (status) {  // failed
    Finish(*state, Failed(*state, *status));
    return Work(std::move(state));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Enqueue(state, /*at_head=*/false);  // the queue is empty
  return Work(std::move(state));
}

bool Engine::DrainEagerHead() {
  while (true) {
    std::shared_ptr<internal::OpState> head;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return true;
      if (!queue_.front()->op->Eager() || failed_.load() || aborted_.load()) return false;
      head = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    MarkStarted(*head);
    std::optional<absl::Status> status =
        head->op->TryEagerly(Deadline::InCoarse(op_timeout_, &stop_), EagerWindow());
    if (!status) {
      // Back at the head: whoever runs the queue next finishes it first.
      std::lock_guard<std::mutex> lock(mu_);
      Enqueue(std::move(head), /*at_head=*/true);
      return false;
    }
    if (!status->ok()) {
      Finish(*head, Failed(*head, *status));
      return false;
    }
    Complete(*head, *std::move(status));
  }
}

void Engine::Execute(internal::OpState& state) {
  absl::Status failed_before;
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_before = sticky_error_;
  }
  // Describe() formats a string: only error paths pay for it.
  if (aborted_.load()) {
    Complete(state, absl::CancelledError(absl::StrCat(describe_rank_, ": ", state.op->Describe(),
                                                      ": communicator was aborted")));
    return;
  }
  if (!failed_before.ok()) {
    std::string message =
        absl::StrCat(describe_rank_, ": ", state.op->Describe(),
                     ": not run because an earlier operation failed: ", failed_before.message());
    // A rank may learn of a mismatch in this very operation from another rank's report before
    // it starts it: it still says what it called, and when the report is about this operation
    // it compares the calls like the ranks that ran it.
    if (const OpSummary op = state.op->Summarize(); op.collective && watch_ != nullptr) {
      const absl::string_view cause = failed_before.message();
      if (absl::StrContains(cause, "mismatched") &&
          absl::StrContains(cause, absl::StrCat(" #", op.seq, " ("))) {
        if (const std::string diff =
                watch_->CompareCalls(op.seq, DescribeCall(op), kCompareCallsWait);
            !diff.empty()) {
          absl::StrAppend(&message, "; what each rank called: ", diff);
        }
      } else {
        watch_->PublishCall(op.seq, DescribeCall(op));
      }
    }
    Complete(state, absl::FailedPreconditionError(message));
    return;
  }
  MarkStarted(state);
  absl::Status status = state.op->Run(Deadline::InCoarse(op_timeout_, &stop_));
  if (status.ok()) {
    Complete(state, std::move(status));
  } else {
    Finish(state, Failed(state, status));
  }
}

void Engine::MarkStarted(internal::OpState& state) {
  if (!state.started) recorder_.Started(state.record);
  state.started = true;
}

void Engine::Complete(internal::OpState& state, absl::Status status) {
  recorder_.Finished(state.record, status);
  Finish(state, std::move(status));
}

absl::Status Engine::Failed(internal::OpState& state, const absl::Status& cause) {
  const bool aborted = aborted_.load();
  std::string peer_fault;
  {
    std::lock_guard<std::mutex> lock(mu_);
    peer_fault = peer_fault_;
  }
  // A wait that ended because another rank reported a failure says only "aborted": quote the
  // report instead, which names the rank that failed first and why.
  bool stopped_by_peer =
      !aborted && !peer_fault.empty() && cause.code() == absl::StatusCode::kCancelled;
  std::string message =
      stopped_by_peer
          ? absl::StrCat(describe_rank_, ": ", state.op->Describe(),
                         ": stopped because another rank failed: ", peer_fault)
          : absl::StrCat(describe_rank_, ": ", state.op->Describe(), ": ", cause.message());
  // A peer that failed first and then exited shows here as a closed link; its report, already
  // in the store, says why it went.
  if (!aborted && !stopped_by_peer && watch_ != nullptr) {
    if (std::string report = watch_->PendingReport(); !report.empty()) {
      message = absl::StrCat(describe_rank_, ": ", state.op->Describe(),
                             ": stopped because another rank failed: ", report,
                             " (seen here as: ", cause.message(), ")");
      stopped_by_peer = true;
      std::lock_guard<std::mutex> lock(mu_);
      if (peer_fault_.empty()) peer_fault_ = std::move(report);
    }
  }
  // (A quoted report carries the reporting rank's list already.)
  if (watch_ != nullptr && !aborted && !stopped_by_peer) {
    if (const std::string exited = watch_->ExitedRanks(); !exited.empty()) {
      absl::StrAppend(&message, "; processes that have exited: ", exited);
    }
    // First of all the other ranks must hear of it (they may be blocked on this one). The report
    // leaves this rank's dump path out: each rank names its own.
    watch_->Publish(message);
  }
  // A mismatch seen by one pair of ranks: compare what every rank called as this operation.
  if (watch_ != nullptr && !aborted && absl::StrContains(message, "mismatched")) {
    const OpSummary op = state.op->Summarize();
    if (op.collective) {
      if (const std::string diff =
              watch_->CompareCalls(op.seq, DescribeCall(op), kCompareCallsWait);
          !diff.empty()) {
        absl::StrAppend(&message, "; what each rank called: ", diff);
      }
    }
  }
  absl::Status status(stopped_by_peer ? absl::StatusCode::kUnavailable : cause.code(), message);
  recorder_.Finished(state.record, status);
  if (!aborted && recorder_.enabled()) {
    absl::StatusOr<std::string> path = recorder_.Dump(message);
    status =
        absl::Status(status.code(), absl::StrCat(message, path.ok() ? " (flight recorder: " : " (",
                                                 path.ok() ? *path : path.status().message(), ")"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sticky_error_.ok()) sticky_error_ = status;
    failed_.store(true, std::memory_order_release);
  }
  return status;
}

void Engine::OnPeerFault(const std::string& report) {
  bool dumped_already = false;  // this rank's own failure wrote the recorder, with its reason
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!peer_fault_.empty()) return;
    peer_fault_ = report;
    dumped_already = !sticky_error_.ok();
    if (sticky_error_.ok()) {
      sticky_error_ =
          absl::UnavailableError(absl::StrCat(describe_rank_, ": another rank failed: ", report));
    }
    failed_.store(true, std::memory_order_release);
  }
  stop_.store(true);
  if (recorder_.enabled() && !dumped_already) {
    (void)recorder_.Dump(absl::StrCat("another rank reported a failure: ", report));
  }
}

void Engine::RunQueued(const internal::OpState* until) {
  while (until == nullptr || !until->done.load(std::memory_order_acquire)) {
    // The progress thread yields the queue to a caller waiting to run it: the caller then pays
    // no hand-off, and the two never compete for the cores.
    if (until == nullptr && inline_waiters_.load(std::memory_order_acquire) > 0) return;
    std::shared_ptr<internal::OpState> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    Execute(*next);
  }
}

absl::Status Engine::WaitFor(internal::OpState& op, absl::Duration timeout) {
  NoteCallerActivity();
  // Running inline is only allowed when the operation's own deadline ends it before the
  // caller's timeout would: otherwise a short Wait could not return on time.
  const bool may_run_inline = timeout >= op_timeout_;
  if (may_run_inline) inline_waiters_.fetch_add(1, std::memory_order_acq_rel);
  struct Leave {
    std::atomic<int>* waiters;
    ~Leave() {
      if (waiters != nullptr) waiters->fetch_sub(1, std::memory_order_acq_rel);
    }
  } leave{may_run_inline ? &inline_waiters_ : nullptr};
  Backoff backoff(oversubscribed_);
  // Read the clock only when running inline did not finish the operation: most waits do.
  std::optional<absl::Time> give_up;
  while (!op.done.load(std::memory_order_acquire)) {
    if (may_run_inline && exec_mu_.try_lock()) {
      RunQueued(&op);
      exec_mu_.unlock();
      continue;
    }
    if (!give_up) give_up = absl::Now() + timeout;
    if (absl::Now() >= *give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat(describe_rank_, ": Work::Wait timed out after ",
                       absl::FormatDuration(timeout), "; the operation is still running"));
    }
    backoff.Pause(nullptr, 1);
  }
  return op.status;
}

void Engine::Abort() {
  aborted_.store(true);
  stop_.store(true);
  std::deque<std::shared_ptr<internal::OpState>> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled.swap(queue_);
    queued_.store(0, std::memory_order_relaxed);
  }
  for (auto& state : cancelled) {
    Complete(*state, absl::CancelledError(absl::StrCat(describe_rank_, ": ", state->op->Describe(),
                                                       ": communicator was aborted")));
  }
}

void Engine::Shutdown() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> sleep(sleep_mu_);
    wake_.notify_one();
  }
  if (progress_thread_.joinable()) progress_thread_.join();
  std::lock_guard<std::mutex> exec(exec_mu_);
  RunQueued(nullptr);
}

void Engine::ProgressLoop() {
  absl::Time last_work = absl::Now();
  uint64_t caller_activity_seen = caller_activity_.load(std::memory_order_relaxed);
  absl::Duration busy_poll = kCallerGrace;
  std::unique_lock<std::mutex> lock(sleep_mu_);
  auto sleep_for = [&](absl::Duration d) { wake_.wait_for(lock, absl::ToChronoNanoseconds(d)); };
  while (!stopping_.load()) {
    const absl::Time now = absl::Now();
    const uint64_t activity = caller_activity_.load(std::memory_order_relaxed);
    // A busy caller runs what it queues when it waits, or completes it as it submits (eager
    // operations): this thread would only take turns with it on its core, and a tiny operation
    // whose peer is descheduled for such a turn misses its eager window.
    const bool caller_busy =
        activity != caller_activity_seen || inline_waiters_.load(std::memory_order_acquire) > 0;
    caller_activity_seen = activity;
    if (queued_.load() == 0) {
      if (now - last_work > kIdleAfter) {
        progress_idle_.store(true);
        wake_.wait(lock, [&] { return stopping_.load() || queued_.load() > 0; });
        progress_idle_.store(false);
      } else if (caller_busy) {
        sleep_for(busy_poll);
        busy_poll = std::min(2 * busy_poll, kBusyPollMax);
      } else {
        busy_poll = kCallerGrace;
        sleep_for(kActivePoll);
      }
      continue;
    }
    last_work = now;
    if (caller_busy) {
      sleep_for(busy_poll);
      busy_poll = std::min(2 * busy_poll, kBusyPollMax);
      continue;
    }
    busy_poll = kCallerGrace;
    lock.unlock();
    const bool ran = exec_mu_.try_lock();
    if (ran) {
      RunQueued(nullptr);
      exec_mu_.unlock();
    }
    lock.lock();
    if (!ran) sleep_for(kActivePoll);  // a caller is running the queue
  }
}

}  // namespace weft
