// Requests, their completion callbacks, and what a communicator shares with its requests.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "backoff.h"
#include "c_api.h"

namespace weft::capi {
namespace {

void ReleaseRequest(weftRequest_t request) {
  if (request->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete request;
}

// The result of a finished request, with the thread's last error set when it failed.
weftResult_t ResultOf(weftRequest_t request) {
  const absl::Status status = request->work.status();
  if (status.ok()) return weftSuccess;
  return SetError(request->shared->Failed(status), std::string(status.message()));
}

// How the engine refuses an operation once the communicator has failed (engine.cc): its own
// code, FailedPrecondition, would read as a usage error.
bool RefusedAfterFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(status.message(), "not run because an earlier operation failed");
}

}  // namespace

weftResult_t CommShared::Failed(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked();
  const weftResult_t code = NoteLocked(status);
  return RefusedAfterFailure(status) ? first_code_ : code;
}

void CommShared::Track(const Work& work) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked();
  in_flight_.push_back(work);
}

weftResult_t CommShared::AsyncError(std::string* message) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked();
  *message = std::string(first_error_.message());
  return first_code_;
}

void CommShared::RefreshLocked() {
  // Issue order is completion order, but a group's operations are issued at its end: scan all.
  auto finished = [this](const Work& work) {
    if (!work.Test()) return false;
    if (absl::Status s = work.status(); !s.ok()) NoteLocked(s);
    return true;
  };
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(), finished),
                   in_flight_.end());
}

weftResult_t CommShared::NoteLocked(const absl::Status& status) {
  // Every operation of ours is waited on or tracked, so a refusal with no failure recorded
  // before it means that another rank's failure stopped the communicator.
  const weftResult_t code = RefusedAfterFailure(status) ? weftRemoteError : ToResult(status);
  if (first_error_.ok()) {
    first_error_ = status;
    first_code_ = code;
  }
  return code;
}

bool CallbackThread::Add(weftRequest_t request) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->stopping) return false;
  if (!thread_.joinable()) {
    thread_ = std::thread(&CallbackThread::Loop, state_);
    state_->id = thread_.get_id();
  }
  state_->queue.push_back(request);
  state_->wake.notify_one();
  return true;
}

void CallbackThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->stopped.store(true, std::memory_order_release);
    state_->wake.notify_one();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // a callback destroyed the communicator: the loop ends after it returns
  } else {
    thread_.join();
  }
}

bool CallbackThread::OnThisThread() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->id == std::this_thread::get_id();
}

void CallbackThread::Loop(std::shared_ptr<State> state) {
  for (;;) {
    weftRequest_t request;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->wake.wait(lock, [&] { return !state->queue.empty() || state->stopping; });
      if (state->queue.empty()) return;
      request = state->queue.front();
      state->queue.pop_front();
    }
    // Work offers no notification: poll, sleeping up to 1 ms (Backoff's oversubscribed pace).
    Backoff backoff(/*oversubscribed=*/true);
    bool never = false;
    while (!request->work.Test()) {
      // Stopped only once the communicator is gone, which finished every issued operation.
      if (state->stopped.load(std::memory_order_acquire)) {
        never = true;
        break;
      }
      backoff.Pause(nullptr, 1);
    }
    const weftResult_t result =
        never ? SetError(weftInvalidUsage,
                         "rank " + std::to_string(request->shared->rank()) +
                             ": the operation was never issued: its group did not end before its "
                             "communicator was destroyed")
              : ResultOf(request);
    request->callback(request, result, request->user_data);
    ReleaseRequest(request);
  }
}

}  // namespace weft::capi

using weft::capi::Guarded;
using weft::capi::SetError;

extern "C" {

weftResult_t weftRequestTest(weftRequest_t request) {
  if (request == nullptr) return SetError(weftInvalidArgument, "weftRequestTest: request is NULL");
  return Guarded("weftRequestTest", [&] {
    return request->work.Test() ? weft::capi::ResultOf(request) : weftInProgress;
  });
}

weftResult_t weftRequestWait(weftRequest_t request) {
  if (request == nullptr) return SetError(weftInvalidArgument, "weftRequestWait: request is NULL");
  return Guarded("weftRequestWait", [&] {
    if (request->group_open != nullptr && request->group_open->load() && !request->work.Test()) {
      return SetError(
          weftInvalidUsage,
          "weftRequestWait: the request's group has not ended: call weftGroupEnd first");
    }
    (void)request->work.Wait();
    return weft::capi::ResultOf(request);
  });
}

weftResult_t weftRequestSetCallback(weftRequest_t request, weftCallback_t callback,
                                    void* userData) {
  if (request == nullptr || callback == nullptr) {
    return SetError(weftInvalidArgument, request == nullptr
                                             ? "weftRequestSetCallback: request is NULL"
                                             : "weftRequestSetCallback: callback is NULL");
  }
  return Guarded("weftRequestSetCallback", [&] {
    if (request->has_callback.exchange(true)) {
      return SetError(weftInvalidUsage,
                      "weftRequestSetCallback: the request has a callback already");
    }
    request->callback = callback;
    request->user_data = userData;
    request->refs.fetch_add(1, std::memory_order_relaxed);
    if (!request->shared->callbacks().Add(request)) {
      request->refs.fetch_sub(1, std::memory_order_relaxed);
      return SetError(weftInvalidUsage,
                      "weftRequestSetCallback: the request's communicator was destroyed");
    }
    return weftSuccess;
  });
}

weftResult_t weftRequestFree(weftRequest_t request) {
  if (request != nullptr) weft::capi::ReleaseRequest(request);
  return weftSuccess;
}

}  // extern "C"
