// GradReducer: data-parallel gradient averaging in buckets that overlap with backward.
//
//   std::vector<weft::GradReducer::Gradient> grads = {{"wte", wte_grad, n_wte}, ...};  // forward
//   auto reducer = weft::GradReducer::Create(comm, grads);        // collective: checks layouts
//   (*reducer)->BeginBackward(/*sync=*/last_micro_step);
//   ... backward: (*reducer)->MarkReady(i) as each gradient becomes final ...
//   absl::Status s = (*reducer)->Finish(absl::Seconds(60));  // gradients now hold the average
//
// Gradients are registered in forward order. Backward produces them roughly in reverse, so
// buckets are filled in reverse registration order: the first bucket (default cap 1 MiB, small so
// that communication starts early) takes the last-registered gradients, the rest up to the cap
// (default 25 MiB) each; a gradient larger than a cap gets a bucket of its own. When the last
// gradient of a bucket is marked ready, that bucket's all-reduce is issued at once (the
// communicator's progress thread runs it while backward continues). Buckets are issued in the
// same order on every rank whatever the order gradients become ready in: a bucket that is complete
// waits for the buckets before it, because collectives must match across ranks.
//
// A bucket whose gradients lie back to back in memory is reduced in place; other buckets are
// packed into a staging buffer and unpacked by Finish. Averaging is exact in the sense of kAvg:
// the sum over ranks, divided once by the rank count.
//
// Create is collective: every rank must register the same gradients (names and sizes) in the same
// order; a hash of the bucket plan is compared across ranks and a mismatch is an error that
// names both ranks. With sync = false (gradient accumulation's non-final micro-steps, "no_sync")
// nothing is communicated and Finish only checks that every gradient was marked.
//
// Not thread-safe: one thread runs backward and calls MarkReady and Finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"
#include "weft/comm/work.h"
#include "weft/kernels/dtype.h"

namespace weft {

struct GradReducerOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t first_bucket_cap_bytes = size_t{1} << 20;
  DataType type = DataType::kFloat32;  // a floating-point type
  // Bound on Create's layout check.
  absl::Duration timeout = absl::Seconds(300);
};

class GradReducer {
 public:
  struct Gradient {
    std::string name;
    void* data = nullptr;  // stays valid and in place for the reducer's lifetime
    size_t count = 0;      // elements
  };

  // Plans the buckets and checks with every rank that the plans agree. `comm` must outlive the
  // reducer.
  static absl::StatusOr<std::unique_ptr<GradReducer>> Create(
      Communicator* comm, std::vector<Gradient> gradients, const GradReducerOptions& options = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Starts a backward pass. sync = false: accumulate locally, communicate nothing.
  void BeginBackward(bool sync);
  // Gradient `index` (registration order) has its final value for this pass. Issues the
  // all-reduce of every bucket that is now complete and next in order. Errors: index out of
  // range, marked twice in one pass, no BeginBackward.
  absl::Status MarkReady(size_t index);
  // Waits (at most `timeout` in all) until every bucket is reduced and unpacked. Errors name the
  // bucket and its gradients: a gradient never marked ready, a failed all-reduce, the timeout.
  absl::Status Finish(absl::Duration timeout);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Registration indices of bucket b's gradients, in the order they were filled.
  const std::vector<size_t>& bucket(int b) const { return buckets_[b].members; }
  size_t bucket_bytes(int b) const { return buckets_[b].bytes; }
  // Buckets whose all-reduce has been issued in the current pass.
  int buckets_issued() const { return next_to_issue_; }
  // Time the last Finish spent blocked on communication (the part backward did not hide).
  absl::Duration last_wait() const { return last_wait_; }
  // The plan's hash, identical on every rank of a consistent job.
  uint64_t plan_hash() const { return plan_hash_; }

 private:
  struct Bucket {
    std::vector<size_t> members;
    size_t bytes = 0;
    size_t pending = 0;                 // gradients not yet ready in this pass
    unsigned char* in_place = nullptr;  // start of the contiguous range, or null if packed
    std::vector<unsigned char> staging;
    Work work;
  };

  GradReducer(Communicator* comm, std::vector<Gradient> gradients,
              const GradReducerOptions& options);
  void Plan();
  absl::Status CheckPlanAcrossRanks();
  void IssueReadyBuckets();
  std::string Describe(int b) const;

  Communicator* comm_;
  std::vector<Gradient> gradients_;
  GradReducerOptions options_;
  size_t element_size_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // per gradient
  std::vector<char> ready_;     // per gradient, this pass
  uint64_t plan_hash_ = 0;
  bool in_pass_ = false;
  bool sync_ = true;
  int next_to_issue_ = 0;
  absl::Duration last_wait_;
};

}  // namespace weft
