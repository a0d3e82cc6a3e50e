// GradReducer: data-parallel gradient averaging in buckets that overlap with backward.
//
//   std::vector<weft::shard::Gradient> grads = {{"wte", wte_grad, n_wte}, ...};  // forward
//   auto reducer = weft::shard::GradReducer::Create(comm, grads);  // collective: checks plans
//   (*reducer)->BeginBackward(/*sync=*/last_micro_step);
//   ... backward: (*reducer)->MarkReady(i) as each gradient becomes final ...
//   absl::Status s = (*reducer)->Finish(absl::Seconds(60));  // gradients now hold the average
//
// The buckets are a BucketPlan (bucket_plan.h): filled in reverse registration order, a small
// first bucket, contiguous buckets detected. When the last gradient of a bucket is marked ready,
// that bucket's all-reduce is issued at once (the communicator's progress thread runs it while
// backward continues). Buckets are issued in the same order on every rank whatever the order
// gradients become ready in: a bucket that is complete waits for the buckets before it, because
// collectives must match across ranks.
//
// A contiguous bucket is reduced in place; other buckets are packed into a staging buffer and
// unpacked by Finish. Averaging is exact in the sense of kAvg: the sum over ranks, divided once
// by the rank count.
//
// Mixed precision's 16-bit wire (GradReducerOptions::wire_type kFloat16 or kBFloat16 for kFloat32
// gradients) halves the bytes sent: when a bucket is issued its gradients are rounded (to nearest,
// ties to even) into a 16-bit staging buffer, contiguous or not, which is all-reduced (kAvg) as
// that type; Finish widens the result back into the gradients. Each element is then
// fp32(avg16(round16(g_0), ..., round16(g_n-1))): the ranks' rounded gradients summed and divided
// as the collective does for that type. staging_bytes() counts the staging either way.
//
// Create is collective: every rank must register the same gradients (names and sizes) in the same
// order with the same wire type; the plan's hash and the wire type are compared across ranks and
// a mismatch is an error that names both ranks. With sync = false (gradient accumulation's
// non-final micro-steps, "no_sync") nothing is communicated and Finish only checks that every
// gradient was marked.
//
// Not thread-safe: one thread runs backward and calls MarkReady and Finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_all_reduce.h"
#include "weft/comm/work.h"
#include "weft/shard/bucket_plan.h"

namespace weft::shard {

// The plan's options (type: a floating-point type) and the bound on Create's plan check.
struct GradReducerOptions : BucketPlanOptions {
  absl::Duration timeout = absl::Seconds(300);
  // The type the all-reduces run in: unset or `type` itself, or kFloat16 / kBFloat16 when `type`
  // is kFloat32. Bucket caps still count bytes of `type`.
  std::optional<DataType> wire_type;
  // Gradient compression (kFloat32 gradients, no 16-bit wire): each bucket is averaged by its own
  // CompressedAllReduce (weft/comm/compressed_all_reduce.h, error feedback kept per bucket) when
  // it is issued, instead of an all-reduce; backward waits for it.
  std::optional<CompressionOptions> compression;
};

class GradReducer {
 public:
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

  const BucketPlan& plan() const { return plan_; }
  // The type the all-reduces run in.
  DataType wire_type() const { return wire_type_; }
  // Compression configured: whether passes from now on compress (warm-up steps do not).
  void set_compression_active(bool active) { compression_active_ = active; }
  bool compressing() const { return compression_active_ && options_.compression.has_value(); }
  // Bytes the compressed reductions sent so far (0 without compression).
  uint64_t compressed_wire_bytes() const;
  // Every bucket's error-feedback state, back to back, and its restore (the same sizes).
  std::vector<float> compression_errors() const;
  absl::Status RestoreCompressionErrors(const std::vector<float>& errors);
  // Bytes of staging this reducer holds for the whole of its life: the packed buckets when the
  // wire type is the gradients' type (contiguous ones reduce in place), else every bucket at the
  // wire type's width. What it costs beyond the gradients themselves.
  size_t staging_bytes() const { return staging_bytes_; }
  // Buckets whose all-reduce has been issued in the current pass.
  int buckets_issued() const { return next_to_issue_; }
  // Time the last Finish spent blocked on communication (the part backward did not hide).
  absl::Duration last_wait() const { return last_wait_; }

 private:
  // Per plan bucket, what one pass needs.
  struct BucketState {
    size_t pending = 0;                  // gradients not yet ready in this pass
    std::vector<unsigned char> staging;  // same type: the packed bucket; empty when contiguous
    std::vector<uint16_t> narrow;        // 16-bit wire: the bucket rounded; else empty
    Work work;
    std::unique_ptr<CompressedAllReduce> compressed;  // compression configured
    std::optional<absl::Status> compressed_result;    // this pass's compressed reduction
  };

  GradReducer(Communicator* comm, std::vector<Gradient> gradients,
              const GradReducerOptions& options, BucketPlan plan);
  absl::Status CheckPlanAcrossRanks();
  absl::Status CreateCompressors();
  // The buckets' compressed all-reduces, in bucket order (empty without compression).
  std::vector<CompressedAllReduce*> Compressors() const;
  void IssueReadyBuckets();
  // 16-bit wire: rounds bucket b's gradients into its narrow buffer, and widens them back.
  void Narrow(int b);
  void Widen(int b);
  std::string Describe(int b) const;

  Communicator* comm_;
  std::vector<Gradient> gradients_;
  GradReducerOptions options_;
  size_t element_size_;
  DataType wire_type_;
  BucketPlan plan_;
  std::vector<BucketState> state_;  // per bucket
  std::vector<char> ready_;         // per gradient, this pass
  bool in_pass_ = false;
  bool sync_ = true;
  int next_to_issue_ = 0;
  size_t staging_bytes_ = 0;
  bool compression_active_ = true;
  absl::Duration last_wait_;
};

}  // namespace weft::shard
