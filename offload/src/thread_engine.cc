// IoEngine over worker threads doing pread/pwrite: where io_uring is unavailable, or forced.
// Requests wait in one queue; each worker takes the oldest, runs it, and posts its result.
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engines.h"

namespace weft::offload::internal {
namespace {

// Bytes moved by one pread/pwrite, or -errno; retries EINTR.
int64_t Transfer(const IoRequest& r) {
  for (;;) {
    const off_t offset = static_cast<off_t>(r.offset);
    const ssize_t n = r.op == IoOp::kRead ? ::pread(r.file->fd(), r.buffer, r.bytes, offset)
                                          : ::pwrite(r.file->fd(), r.buffer, r.bytes, offset);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

class ThreadEngine final : public IoEngine {
 public:
  ThreadEngine(int threads, const std::string& why)
      : IoEngine(
            absl::StrCat("threads (", threads, " workers", why.empty() ? "" : "; ", why, ")")) {
    workers_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  // Queued requests are dropped; each worker finishes the one it runs (a bounded disk transfer).
  ~ThreadEngine() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      queue_.clear();
    }
    work_ready_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  absl::string_view name() const override { return "threads"; }

 protected:
  absl::Status Start(uint64_t seq, const IoRequest& r) override {
    {
      std::lock_guard lock(mu_);
      queue_.emplace_back(seq, r);
    }
    work_ready_.notify_one();
    return absl::OkStatus();
  }

  absl::Status Collect(absl::Time deadline, std::vector<Result>* out) override {
    std::unique_lock lock(mu_);
    results_ready_.wait_until(lock, absl::ToChronoTime(deadline),
                              [this]()
                                  ABSL_NO_THREAD_SAFETY_ANALYSIS { return !results_.empty(); });
    out->insert(out->end(), results_.begin(), results_.end());
    results_.clear();
    return absl::OkStatus();
  }

 private:
  void Work() {
    for (;;) {
      std::pair<uint64_t, IoRequest> job;
      {
        std::unique_lock lock(mu_);
        work_ready_.wait(
            lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = queue_.front();
        queue_.pop_front();
      }
      const int64_t value = Transfer(job.second);
      {
        std::lock_guard lock(mu_);
        results_.push_back({job.first, value});
      }
      results_ready_.notify_one();
    }
  }

  // std::mutex rather than absl::Mutex: the system's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex's ordering and reports false races.
  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable results_ready_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::pair<uint64_t, IoRequest>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Result> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<IoEngine> MakeThreadEngine(int threads, const std::string& why) {
  return std::make_unique<ThreadEngine>(threads, why);
}

}  // namespace weft::offload::internal
