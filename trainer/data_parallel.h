// DataParallel: how the ranks' gradients become one update of the model.
//
//   zero = 0  every rank keeps everything; gradients are all-reduced in buckets while backward
//             runs (shard::GradReducer), and every rank applies AdamW to the whole model.
//   zero = 1  every rank keeps the AdamW moments for its slices only (shard::ShardLayout over
//             the model's units); gradients are reduce-scattered in place into those slices of the
//             full gradients after backward, the rank updates its slices of the full parameters,
//             and the updated parameters are all-gathered in place.
//   zero = 2  as 1, with each unit's reduce-scatter issued as soon as backward finishes the unit
//             into compact gradient slices, and its full gradient released once reduced.
//   zero = 3  as 2, and the full parameters too are resident only around their use: a unit is
//             all-gathered before its forward and again before its backward (the next unit
//             prefetched while the current one computes, within max_gathered_mb) and released
//             after; the embeddings, which the tied head uses at both ends of a pass, stay
//             gathered from the first forward to the end of backward.
//
// Hybrid sharding (shard_group = k, any stage 1-3): the above inside groups of k consecutive ranks
// (or the ranks of each node, shard_group = "node"), the groups replicas of each other: a gradient
// slice is reduce-scattered inside the group, then all-reduced across the groups.
//
// The global gradient norm (clipping) is one all-reduce of the shards' sums of squares under ZeRO.
// A single process (no communicator) is the trivial case of plain data parallelism.
//
// Under tensor parallelism `comm` is this rank's data-parallel group, and each rank of a
// tensor-parallel group runs its own DataParallel over its part of the model (the model's
// TensorParallel): the norm sums the group's parts, counting replicated tensors once; under
// sequence parallelism the partial gradients of replicated tensors are summed over the group
// first; checkpoints place each part in the whole tensors, replicated ones saved by the group's
// first rank. Under pipeline parallelism each stage's ranks run theirs over the stage's part; the
// norm sums the stages too, counting the tied embedding's copy at the head once.
//
//   auto dp = DataParallel::Create(config, comm, &model);
//   dp->ZeroGrads(); dp->BeginBackward(sync);
//   model.Backward(scale, [&](int t) { dp->TensorReady(t); });
//   dp->FinishBackward(&wait); ... dp->Update(lr, &grad_norm, &wait);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config.h"
#include "model.h"
#include "optimizer.h"
#include "powersgd.h"
#include "weft/comm/communicator.h"
#include "weft/shard/checkpoint.h"
#include "weft/shard/grad_reducer.h"
#include "weft/shard/zero_reducer.h"

namespace weft::trainer {

class DataParallel : public UnitHooks {
 public:
  // The model's units must be padded as PadQuantum says, and its parameters initialised (or
  // loaded: then call ParamsLoaded). Collective when `comm` is set: the ranks check that their
  // plans agree. `comm` and `model` must outlive the result.
  // `stages`: this rank's pipeline group (null without one), over which the norm sums too.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(const Config& config,
                                                              Communicator* comm, Gpt* model,
                                                              Communicator* stages = nullptr);
  ~DataParallel() override;
  // The ranks this rank's ZeRO shard group holds on `comm` (null: one process): shard_group, the
  // ranks of this rank's node for "node", else every rank. Validate has checked the number.
  static std::vector<int> ShardGroup(const Config& config, const Communicator* comm);
  // The unit padding `config` needs on `comm`: equal slices of 64-byte-aligned elements.
  static size_t PadQuantum(const Config& config, const Communicator* comm);

  // The model's parameters were overwritten (a checkpoint): ZeRO takes its slices again.
  absl::Status ParamsLoaded();
  // Zeroes the gradients before a step.
  void ZeroGrads();
  // Starts a backward pass; sync = false (accumulation's non-final micro-steps) communicates
  // nothing.
  void BeginBackward(bool sync);
  // Gradient compression (configured): whether this step compresses (not in warm-up).
  void set_compression_active(bool active) {
    compression_active_ = active;
    if (reducer_ != nullptr) reducer_->set_compression_active(active);
    if (zero_ != nullptr) zero_->set_compression_active(active);
  }
  bool compressing() const {
    if (powersgd_ != nullptr) return compression_active_;
    if (zero_ != nullptr) return zero_->compressing();
    return reducer_ != nullptr && reducer_->compressing();
  }
  // The error-feedback state (PowerSGD's: with its Q's), and its restore (from this rank's save).
  std::vector<float> compression_errors() const;
  absl::Status RestoreCompressionErrors(const std::vector<float>& errors);
  // The model's callback: tensor `tensor`'s gradient is final for this pass.
  void TensorReady(int tensor);
  // Waits for the pass's gradient communication; adds the time blocked to *comm_wait.
  absl::Status FinishBackward(absl::Duration* comm_wait);
  // Clips to config.grad_clip and applies AdamW with `lr`; *grad_norm is the norm before
  // clipping. `unscale` (fp16: 1 / the loss scale) multiplies the gradients first, fused with the
  // clipping's scaling.
  absl::Status Update(double lr, double* grad_norm, absl::Duration* comm_wait, float unscale = 1);
  // No infinity or NaN in the gradients this rank updates (after FinishBackward).
  bool GradientsFinite();
  // The first error of the unit hooks since the last call (a forward-only pass checks it).
  absl::Status TakeError();
  // Collective: the full parameters resident on every rank from now on, for a forward pass on
  // one rank alone (the closing sample).
  absl::Status GatherForInference();

  // Moves AdamW's moments to disk arrays of `store` (which must outlive this); Update then
  // streams them (optimizer.h). With `params` (ZeRO-3 only), this rank's parameter slices too:
  // each unit's slice is read back just before the unit is gathered, and the update streams them.
  absl::Status OffloadOptimizer(offload::TieredStore* store, bool params = false);
  bool params_offloaded() const { return slices_ != nullptr; }
  // How long the last Update's AdamW step took (with offloaded moments: their I/O included).
  absl::Duration optimizer_time() const { return optimizer_time_; }
  // Bytes of AdamW's moments this rank keeps (in memory or offloaded).
  size_t moment_bytes() const { return 2 * adam_->owned_size() * sizeof(float); }
  // Elements of each range the optimizer updates (its offloaded arrays' sizes).
  const std::vector<size_t>& optimizer_ranges() const { return adam_->range_sizes(); }
  // Bytes of ZeRO-3's parameter slices on this rank (0 under the other stages: not offloadable).
  size_t param_slice_bytes() const {
    return zero_ != nullptr && zero_->stage() == 3 ? zero_->layout().shard_size() * sizeof(float)
                                                   : 0;
  }
  // Offloaded state into memory for a checkpoint (CheckpointPieces points at it), and back.
  absl::Status FetchOffloaded();
  absl::Status ReleaseOffloaded();

  // This rank's share of a checkpoint (arrays: parameters, first and second moment; tensor
  // indices are the layout's): under ZeRO its slices of every unit, saved by the first shard group
  // alone (the other groups hold copies); otherwise an equal share of the packed tensors.
  std::vector<shard::SavedPiece> CheckpointPieces();
  // Loads the parameters, the moments this rank keeps and the optimizer's step count from a
  // checkpoint saved by any layout; the model's tensors must fit it (CheckLayout).
  absl::Status LoadCheckpoint(const shard::CheckpointReader& reader, int64_t optimizer_step);
  int64_t optimizer_step() const { return adam_->step(); }
  // Bytes this rank sent for gradients and parameters since the last call (the tensor-parallel
  // group's included), counted as a ring sends them: 2(N-1)/N of each all-reduce, (N-1)/N of each
  // reduce-scatter and all-gather.
  uint64_t TakeBytesSent();

  // Bytes this rank keeps between steps (parameters, gradients, shards, moments), and the peak of
  // what it holds only during a step (bucket staging, full gradients under zero >= 2, gathered
  // parameters under zero = 3) so far.
  size_t state_bytes() const;
  size_t buffer_bytes() const;
  // One line for the log: the bytes by kind against the ZeRO paper's model for the stage (fp32
  // AdamW: 4Ψ parameters + 4Ψ gradients + 8Ψ moments, the sharded parts divided by N).
  std::string MemoryReport() const;

  // UnitHooks (zero >= 2).
  void Before(int unit, Pass pass, bool reads_params) override;
  void After(int unit, Pass pass) override;

 private:
  DataParallel(const Config& config, Communicator* comm, Gpt* model, Communicator* stages);
  // Bytes this rank holds, by kind: kept between steps (parameters, gradients, optimizer moments;
  // full or sliced as the stage says) and the peaks of what it holds only during a step.
  struct MemoryFigures {
    size_t params = 0, grads = 0, optimizer = 0;
    size_t gathered = 0;         // zero = 3: gathered units alive at once
    size_t working = 0;          // mixed precision: the model's rounded working copies
    size_t offload_staging = 0;  // offloaded moments: the stream's staging tiles
    size_t buckets = 0;  // staged all-reduce buckets, or full unit gradients under zero >= 2
  };
  MemoryFigures Memory() const;
  // The unit the model uses after `unit` in `pass` (UnitHooks' order), or -1.
  int NextUnit(int unit, Pass pass) const;
  // The flat ranges whose moments this rank keeps, and where each starts in AdamW's compact
  // moments.
  std::vector<std::pair<shard::Range, size_t>> MomentRanges() const;
  // The gradient ranges this rank updates, each with where its gradients are now.
  std::vector<std::pair<shard::Range, float*>> GradientSpans();
  // Sums the partial gradients (TensorView::partial_gradient) inside `spans` over the
  // tensor-parallel group, in one all-reduce.
  absl::Status SumPartialGradients(const std::vector<std::pair<shard::Range, float*>>& spans);
  // The sum of squares of the gradients in `span` that this rank counts in the global norm: all
  // of them on a tensor-parallel group's first rank, its parts only (not the replicated tensors)
  // on the others; never a tied copy.
  double CountedSquares(const std::pair<shard::Range, float*>& span) const;
  // Appends the pieces of local elements [first, first + count) of tensor `tensor`, whose arrays
  // start at `data`, placed in the whole tensor; nothing for a replicated tensor off the group's
  // first rank.
  void AddPieces(int tensor, size_t first, size_t count, std::vector<const float*> data,
                 std::vector<shard::SavedPiece>* pieces) const;

  const Config& config_;
  Communicator* comm_;
  Gpt* model_;
  TensorParallel& tp_;    // the model's
  Communicator* stages_;  // the pipeline group, or null
  std::unique_ptr<AdamW> adam_;
  std::unique_ptr<Communicator> shard_group_;    // hybrid: this rank's shard group
  std::unique_ptr<Communicator> replicas_;       // hybrid: its peers in the other groups
  Communicator* shard_comm_ = nullptr;           // the ranks a ZeRO shard spans
  std::unique_ptr<shard::GradReducer> reducer_;  // zero = 0 on several ranks
  std::unique_ptr<PowerSgd> powersgd_;           // compression=powersgd instead of reducer_
  bool compression_active_ = true;
  bool sync_ = true;                          // this backward pass reduces
  std::unique_ptr<shard::ZeroReducer> zero_;  // zero >= 1 on several ranks
  std::vector<size_t> unit_pending_;          // per unit: tensors not yet ready in this pass
  absl::Status error_;                        // the first error of the hooks and callbacks
  uint64_t bytes_sent_ = 0;                   // counted up to the last TakeBytesSent
  uint64_t pending_bytes_ = 0;                // the all-reduce reducer's, since then
  uint64_t compressed_seen_ = 0;              // compressed bytes counted so far
  size_t offload_staging_bytes_ = 0;
  // Offloaded parameters: the ZeRO-3 slices in the store, and a copy fetched for a checkpoint.
  class OffloadedSlices;
  std::unique_ptr<OffloadedSlices> slices_;
  std::vector<float> fetched_params_;
  absl::Duration optimizer_time_;
};

}  // namespace weft::trainer
