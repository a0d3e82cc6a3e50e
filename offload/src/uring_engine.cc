// IoEngine over one io_uring. Requests beyond the ring's depth wait in a queue and enter the ring
// as completions free entries; results are keyed by the request's sequence number (user_data).
#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engines.h"

namespace weft::offload::internal {
namespace {

// How long the destructor waits for requests the kernel has already started.
constexpr absl::Duration kDrainTimeout = absl::Seconds(30);

class UringEngine final : public IoEngine {
 public:
  explicit UringEngine(int depth)
      : IoEngine(absl::StrCat("io_uring (queue depth ", depth, ")")), depth_(depth) {}

  // 0, or -errno from io_uring_queue_init.
  int Init() {
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth_), &ring_, 0);
    initialized_ = rc == 0;
    return rc;
  }

  ~UringEngine() override {
    if (!initialized_) return;
    pending_.clear();
    if (in_ring_ > 0) {
      if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
        io_uring_sqe_set_data64(sqe, kCancelTag);
        ++in_ring_;
      }
      std::vector<Result> ignored;
      const absl::Time deadline = absl::Now() + kDrainTimeout;
      while (in_ring_ > 0 && absl::Now() < deadline) {
        if (!Collect(deadline, &ignored).ok()) break;
      }
    }
    io_uring_queue_exit(&ring_);
  }

  absl::string_view name() const override { return "io_uring"; }

 protected:
  absl::Status Start(uint64_t seq, const IoRequest& r) override {
    pending_.emplace_back(seq, r);
    return Fill();
  }

  absl::Status Collect(absl::Time deadline, std::vector<Result>* out) override {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
      __kernel_timespec ts = {};
      ts.tv_sec = absl::ToInt64Seconds(left);
      ts.tv_nsec = absl::ToInt64Nanoseconds(left - absl::Seconds(ts.tv_sec));
      const int rc = io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
      if (rc == -ETIME) return absl::OkStatus();
      if (rc == -EINTR) continue;
      if (rc < 0) {
        return absl::InternalError(absl::StrCat("io_uring_wait_cqe: ", std::strerror(-rc)));
      }
      break;
    }
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const uint64_t seq = io_uring_cqe_get_data64(cqe);
      const int64_t res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_ring_;
      if (seq != kCancelTag) out->push_back({seq, res});
    }
    return Fill();
  }

 private:
  static constexpr uint64_t kCancelTag = ~uint64_t{0};

  // Moves queued requests into free ring entries and submits them.
  absl::Status Fill() {
    bool added = false;
    while (!pending_.empty() && in_ring_ < depth_) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      const auto& [seq, r] = pending_.front();
      const auto bytes = static_cast<unsigned>(r.bytes);
      if (r.op == IoOp::kRead) {
        io_uring_prep_read(sqe, r.file->fd(), r.buffer, bytes, r.offset);
      } else {
        io_uring_prep_write(sqe, r.file->fd(), r.buffer, bytes, r.offset);
      }
      io_uring_sqe_set_data64(sqe, seq);
      pending_.pop_front();
      ++in_ring_;
      added = true;
    }
    if (!added) return absl::OkStatus();
    int rc;
    do {
      rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    if (rc < 0) return absl::InternalError(absl::StrCat("io_uring_submit: ", std::strerror(-rc)));
    return absl::OkStatus();
  }

  io_uring ring_ = {};
  bool initialized_ = false;
  const int depth_;
  int in_ring_ = 0;  // submitted to the ring, completion not yet seen
  std::deque<std::pair<uint64_t, IoRequest>> pending_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> MakeUringEngine(int queue_depth) {
  auto engine = std::make_unique<UringEngine>(queue_depth);
  if (const int rc = engine->Init(); rc < 0) {
    return absl::UnavailableError(
        absl::StrCat("io_uring_queue_init(", queue_depth, "): ", std::strerror(-rc)));
  }
  return engine;
}

}  // namespace weft::offload::internal
