#include "work.h"

#include <Python.h>  // the GIL, released while joining

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace weft::torch_backend {

WeftWork::WeftWork(int rank, c10d::OpType type, std::vector<weft::Work> works, Staged staged)
    : c10d::Work(rank, type),
      works_(std::move(works)),
      outputs_(std::move(staged.outputs)),
      keep_alive_(std::move(staged.keep_alive)),
      copies_(std::move(staged.copies)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool WeftWork::WeftDone() const {
  return std::all_of(works_.begin(), works_.end(), [](const weft::Work& w) { return w.Test(); });
}

bool WeftWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  return FinishIfDone();
}

bool WeftWork::FinishIfDone() {
  if (!WeftDone()) return false;
  if (!finishing_.exchange(true, std::memory_order_acq_rel)) {
    Finish();
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });
  return true;
}

bool WeftWork::wait(std::chrono::milliseconds timeout) {
  const absl::Time deadline =
      timeout == kNoTimeout ? absl::InfiniteFuture() : absl::Now() + absl::FromChrono(timeout);
  for (const weft::Work& work : works_) {
    // The status is read when finishing; here only whether the wait ended in time matters.
    (void)work.Wait(deadline - absl::Now());
    TORCH_CHECK(work.Test(), "weft: Work.wait timed out after ", timeout.count(),
                " ms; the operation is still running (its own timeout is WEFT_TIMEOUT or the "
                "process group's)");
  }
  FinishIfDone();
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WeftWork::Finish() {
  std::exception_ptr error;
  for (const weft::Work& work : works_) {
    if (absl::Status status = work.status(); !status.ok()) {
      error = std::make_exception_ptr(std::runtime_error("weft: " + status.ToString()));
      break;
    }
  }
  if (!error) {
    try {
      at::NoGradGuard no_grad;
      for (auto& [destination, source] : copies_) destination.copy_(source);
    } catch (...) {
      error = std::current_exception();
    }
  }
  // The future first, as Gloo's works do: once wait() returns, get_future().value() is there.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

Completer::Completer() : thread_([this] { Loop(); }) {}

void Completer::Add(c10::intrusive_ptr<WeftWork> work) {
  std::vector<c10::intrusive_ptr<WeftWork>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(work));
    finished.swap(finished_);
  }
  wake_.notify_one();
  // `finished` goes here, on the issuing thread, which may take the GIL.
}

void Completer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_one();
  // Joined without the GIL: finishing runs the futures' callbacks, which may be Python's.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  thread_.join();
  if (saved != nullptr) PyEval_RestoreThread(saved);
  finished_.clear();
}

void Completer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;
    c10::intrusive_ptr<WeftWork> oldest = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    auto pause = std::chrono::microseconds(20);
    while (!oldest->FinishIfDone()) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    lock.lock();
    finished_.push_back(std::move(oldest));
  }
}

}  // namespace weft::torch_backend
