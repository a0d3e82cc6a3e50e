// What the C API's handles are (weft/comm/weft.h), shared by the c_api*.cc files.
//
// A weftComm_t counts its own reference and every call in progress on it (Use): weftCommAbort
// drops the handle's reference while calls on other threads are still inside, and the last of
// them frees the handle and its communicator. Requests hold the CommShared part only, so a
// request may outlive its communicator and never keeps one alive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "weft/comm/communicator.h"
#include "weft/comm/weft.h"

namespace weft::capi {

// Sets this thread's last error message; returns `result`.
weftResult_t SetError(weftResult_t result, const std::string& message);
// The C code of a failed status (not its sticky-error adjustment: see CommShared::Failed).
weftResult_t ToResult(const absl::Status& status);
// Sets the last error from `status` (when it failed) and returns its code.
weftResult_t FromStatus(const absl::Status& status);
// Runs `body`, turning an escaping exception (allocation failure, thread creation) into
// weftInternalError: no exception crosses into C.
template <typename F>
weftResult_t Guarded(const char* function, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return SetError(weftInternalError, std::string(function) + ": " + e.what());
  } catch (...) {
    return SetError(weftInternalError, std::string(function) + ": unknown exception");
  }
}

// Runs the completion callbacks of one communicator's requests on a thread of its own, started
// with the first. Requests are taken in the order they were added; each one's callback runs once
// its operation has finished, or, after Stop(), at once if it never will (its group never ended).
class CallbackThread {
 public:
  CallbackThread() : state_(std::make_shared<State>()) {}
  ~CallbackThread() { Stop(); }
  // Takes a reference on `request` until its callback has returned. False after Stop().
  bool Add(weftRequest_t request);
  // Runs the callbacks still queued, then ends the thread: joins it, or lets it finish on its
  // own when called from a callback.
  void Stop();
  bool OnThisThread() const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable wake;
    std::deque<weftRequest_t> queue;  // guarded by mu
    bool stopping = false;            // guarded by mu; also read by the polling loop
    std::atomic<bool> stopped{false};
    std::thread::id id;
  };
  static void Loop(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
  std::thread thread_;  // started by the first Add, under state_->mu
};

// The part of a communicator that its requests share: its first failure, the operations in
// flight (to find that failure without waiting), and its callback thread.
class CommShared {
 public:
  explicit CommShared(int rank) : rank_(rank) {}
  int rank() const { return rank_; }

  // The result of an operation that failed with `status`, recorded as the communicator's async
  // error when it is the first. An operation refused because the communicator failed before it
  // returns the code of that first failure.
  weftResult_t Failed(const absl::Status& status);
  // Remembers an issued operation until it finishes.
  void Track(const Work& work);
  // The code of the first failure among the finished operations (weftSuccess while there is
  // none), and its message. Never blocks.
  weftResult_t AsyncError(std::string* message);
  CallbackThread& callbacks() { return callbacks_; }

 private:
  // With mu_ held: drops finished operations, recording the first failure among them.
  void RefreshLocked();
  // With mu_ held: records `status` when it is the first failure; returns its code.
  weftResult_t NoteLocked(const absl::Status& status);

  const int rank_;
  std::mutex mu_;
  std::deque<Work> in_flight_;             // guarded by mu_
  absl::Status first_error_;               // guarded by mu_
  weftResult_t first_code_ = weftSuccess;  // guarded by mu_
  CallbackThread callbacks_;
};

struct CommCore {
  ~CommCore();
  std::unique_ptr<Communicator> comm;
  std::shared_ptr<CommShared> shared;
};

// Wraps a new communicator into a handle.
weftComm_t NewHandle(std::unique_ptr<Communicator> comm);
// Drops one reference on `comm`: the last one frees it.
void Release(weftComm_t comm);

// A call in progress on a handle, which keeps it alive until the call returns.
class Use {
 public:
  // On a NULL handle, sets the error "<function>: comm is NULL" and holds nothing.
  Use(weftComm_t comm, const char* function);
  ~Use() {
    if (comm_ != nullptr) Release(comm_);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

  explicit operator bool() const { return comm_ != nullptr; }
  CommCore& core() const;
  const std::shared_ptr<CommCore>& shared_core() const;

 private:
  weftComm_t comm_;
};

// A call's type and operator in Weft's terms, or the argument error that names the C function
// (`op` absent: a call without one).
struct Converted {
  DataType type = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  absl::Status status;
};
Converted Convert(const Communicator& comm, const char* function, weftDataType_t type,
                  std::optional<weftRedOp_t> op = std::nullopt);
// A Work already finished with an argument error: the communicator is still fine.
Work Refused(const absl::Status& status);

// Issues one operation with `issue` (a call on the Communicator) and completes the C call:
// waits when `request` is NULL (or, inside a group, leaves that to weftGroupEnd), otherwise
// hands out a request.
template <typename Issue>
weftResult_t RunOp(weftComm_t comm, weftRequest_t* request, const char* function, Issue&& issue);
weftResult_t Finish(CommCore& core, Work work, weftRequest_t* request);
// Inside a group: makes sure `core`'s communicator has begun the thread's group.
void JoinGroup(const std::shared_ptr<CommCore>& core, bool blocking);
bool InGroup();
// Set in a request made inside a group while that group is open.
std::shared_ptr<std::atomic<bool>> OpenGroupFlag();

template <typename Issue>
weftResult_t RunOp(weftComm_t comm, weftRequest_t* request, const char* function, Issue&& issue) {
  return Guarded(function, [&]() -> weftResult_t {
    if (request != nullptr) *request = nullptr;
    const Use use(comm, function);
    if (!use) return weftInvalidArgument;
    if (InGroup()) JoinGroup(use.shared_core(), request == nullptr);
    return Finish(use.core(), issue(*use.core().comm), request);
  });
}

}  // namespace weft::capi

struct weftComm {
  std::shared_ptr<weft::capi::CommCore> core;  // shared with the thread groups it is part of
  std::atomic<int> refs{1};  // the handle's own, until destroyed or aborted, and one per call
};

// Released when the user has freed it and its callback (if any) has returned.
struct weftRequest {
  weft::Work work;
  std::shared_ptr<weft::capi::CommShared> shared;
  std::shared_ptr<std::atomic<bool>> group_open;  // null outside groups
  std::atomic<int> refs{1};
  std::atomic<bool> has_callback{false};
  weftCallback_t callback = nullptr;
  void* user_data = nullptr;
};
