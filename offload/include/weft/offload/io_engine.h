// IoEngine: asynchronous reads and writes of aligned blocks at file offsets.
//
// A caller submits requests in batches and reaps their completions, each reap with a deadline, so
// no wait can hang: a deadline that passes with nothing completed is a DeadlineExceeded error
// naming the operation, file and offset that has waited longest. Two implementations, chosen at
// run time by MakeIoEngine:
//   io_uring  one ring of `queue_depth` entries; requests beyond it wait in the engine's queue.
//   threads   `queue_depth` worker threads doing pread/pwrite, where io_uring_queue_init fails
//             (old kernel, seccomp) or when forced (IoEngineKind::kThreads, WEFT_OFFLOAD_IO).
// Both report the same errors: errno as an error naming the operation, file and offset; a
// transfer shorter than asked as DataLoss (read) or Internal (write), with both byte counts.
//
// An engine is used by one thread at a time. A buffer belongs to the engine from Submit until
// its completion is reaped; destroying the engine cancels what has not started and waits (for a
// bounded time) for what has, after which no buffer is touched again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "weft/offload/io_file.h"

namespace weft::offload {

enum class IoOp { kRead, kWrite };

// "read" or "write".
absl::string_view IoOpName(IoOp op);

// One transfer. `buffer`, `offset` and `bytes` are multiples of kIoAlignment (bytes > 0);
// `file` outlives the request; `tag` is the caller's, handed back with the completion.
struct IoRequest {
  IoOp op = IoOp::kRead;
  const IoFile* file = nullptr;
  uint64_t offset = 0;
  void* buffer = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;
};

// A finished request: its tag, op and length, and OK or the error that ended it.
struct IoCompletion {
  uint64_t tag = 0;
  IoOp op = IoOp::kRead;
  size_t bytes = 0;
  absl::Status status;
};

enum class IoEngineKind {
  kAuto,  // WEFT_OFFLOAD_IO=threads|io_uring decides if set; else io_uring, or threads if it fails
  kIoUring,  // io_uring or an error
  kThreads,  // the thread pool
};

struct IoEngineOptions {
  IoEngineKind kind = IoEngineKind::kAuto;
  // Requests in flight at once: ring entries, or worker threads. In [1, 64].
  int queue_depth = 16;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  // "io_uring" or "threads".
  virtual absl::string_view name() const = 0;
  // name() with its queue depth and, for threads, why io_uring is not running.
  const std::string& description() const { return description_; }

  // Queues every request of `batch` and starts as many as the queue depth allows. A request that
  // breaks IoRequest's rules is InvalidArgument (naming it), and then none of the batch is queued.
  absl::Status Submit(absl::Span<const IoRequest> batch);
  // Appends to `done` every completion ready within `timeout` (at least one, unless nothing is
  // outstanding: then it returns at once). DeadlineExceeded when the timeout passes first; the
  // requests stay outstanding and may be reaped later.
  absl::Status Reap(absl::Duration timeout, std::vector<IoCompletion>* done);
  // Requests submitted and not yet reaped.
  size_t outstanding() const { return outstanding_.size(); }

 protected:
  explicit IoEngine(std::string description) : description_(std::move(description)) {}

  // What an implementation hands back: the sequence number Start was given, and the bytes moved
  // or -errno.
  struct Result {
    uint64_t seq;
    int64_t value;
  };
  // Starts (or queues) `request` under sequence number `seq`.
  virtual absl::Status Start(uint64_t seq, const IoRequest& request) = 0;
  // Appends results that are ready, waiting for at least one until `deadline`; appends none if
  // the deadline passes first. Errors only for a failure of the engine itself.
  virtual absl::Status Collect(absl::Time deadline, std::vector<Result>* out) = 0;

  std::string description_;

 private:
  uint64_t next_seq_ = 0;
  std::map<uint64_t, IoRequest> outstanding_;  // by sequence: the first is the oldest
};

// The engine `options` ask for (see IoEngineKind). InvalidArgument for a queue depth outside
// [1, 64] or an unknown WEFT_OFFLOAD_IO; with kIoUring, the io_uring_queue_init error.
absl::StatusOr<std::unique_ptr<IoEngine>> MakeIoEngine(const IoEngineOptions& options = {});

}  // namespace weft::offload
