// WeftWork: the c10d::Work of one process-group call, over the weft::Works it issued; and the
// Completer, the thread that finishes works nobody waits on, so that their futures complete.
//
// A WeftWork finishes exactly once, on whichever thread first sees all its weft::Works done: the
// issuing thread (tiny collectives are done when issued), a thread in wait() or isCompleted(), or
// the Completer. Finishing copies staged results into the caller's tensors, then marks the future
// (a list of the output tensors, or the error) and the work. The Completer only watches:
// Weft's own progress thread, or a thread in wait(), runs the operations.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "torch/csrc/distributed/c10d/Work.hpp"
#include "weft/comm/work.h"

namespace weft::torch_backend {

// What a call leaves to finishing: the tensors it reports, the contiguous inputs and staging
// buffers Weft reads or writes until then, and the copies of staged results into the caller's
// tensors (destination, source).
struct Staged {
  Staged() = default;
  explicit Staged(std::vector<at::Tensor> reported) : outputs(std::move(reported)) {}

  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> keep_alive;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
};

class WeftWork : public c10d::Work {
 public:
  WeftWork(int rank, c10d::OpType type, std::vector<weft::Work> works, Staged staged);

  bool isCompleted() override;
  // kNoTimeout (the default) waits as long as the operation's own timeout allows. Throws the
  // operation's error (Weft's full message), or a timeout error when `timeout` passes first.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Finishes the work if every weft::Work is done; true when it is finished (by anyone).
  bool FinishIfDone();

 private:
  bool WeftDone() const;
  void Finish();

  std::vector<weft::Work> works_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> finishing_{false};  // claimed by the one thread that finishes
};

// Finishes the works handed to it in issue order (Weft completes them in that order), polling
// the oldest with sleeps from 20 us growing to 1 ms. Stop() finishes what is pending first.
//
// Its thread never drops the last reference to a work: releasing a tensor that has a Python
// object takes the GIL, which a thread must not take while the interpreter shuts down (Python
// then ends the thread mid-destructor). Finished works wait in finished_ until the next Add or
// Stop releases them on a thread of the caller's.
class Completer {
 public:
  Completer();
  ~Completer() { Stop(); }

  void Add(c10::intrusive_ptr<WeftWork> work);
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<c10::intrusive_ptr<WeftWork>> pending_;
  std::vector<c10::intrusive_ptr<WeftWork>> finished_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft::torch_backend
