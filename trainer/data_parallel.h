// DataParallel: how the ranks' gradients become one update of the model.
//
//   zero = 0  every rank keeps everything; gradients are all-reduced in buckets while backward
//             runs (shard::GradReducer), and every rank applies AdamW to the whole model.
//   zero = 1  every rank keeps the AdamW moments of its slices only (shard::ShardLayout over the
//             model's units); gradients are reduce-scattered into those slices after backward,
//             the rank updates its slices, and the updated parameters are all-gathered.
//   zero = 2  as 1, with each unit's reduce-scatter issued as soon as backward finishes the unit.
//
// The global gradient norm (clipping) is one all-reduce of the shards' sums of squares under ZeRO.
// A single process (no communicator) is the trivial case of plain data parallelism.
//
//   auto dp = DataParallel::Create(config, comm, &model);
//   dp->BeginBackward(sync); model.Backward(scale, [&](int t) { dp->TensorReady(t); });
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
#include "weft/comm/communicator.h"
#include "weft/shard/grad_reducer.h"
#include "weft/shard/zero_reducer.h"

namespace weft::trainer {

class DataParallel {
 public:
  // The model's units must be padded for ZeRO (PadQuantum). Collective when `comm` is set: the
  // ranks check that their plans agree. `comm` and `model` must outlive the result.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(const Config& config,
                                                              Communicator* comm, Gpt* model);
  // The unit padding `config` needs on `world` ranks.
  static size_t PadQuantum(const Config& config, int world);

  // Starts a backward pass; sync = false (accumulation's non-final micro-steps) communicates
  // nothing.
  void BeginBackward(bool sync);
  // The model's callback: tensor `tensor`'s gradient is final for this pass.
  void TensorReady(int tensor);
  // Waits for the pass's gradient communication; adds the time blocked to *comm_wait.
  absl::Status FinishBackward(absl::Duration* comm_wait);
  // Clips to config.grad_clip and applies AdamW with `lr`; *grad_norm is the norm before
  // clipping.
  absl::Status Update(double lr, double* grad_norm, absl::Duration* comm_wait);

  // The moments over the model's whole flat buffer (collective under ZeRO: every rank's slices).
  absl::Status FullMoments(std::vector<float>* m, std::vector<float>* v);
  // Restores the optimizer from moments over the whole flat buffer and its step count.
  void LoadMoments(const std::vector<float>& m, const std::vector<float>& v, int64_t step);
  int64_t optimizer_step() const { return adam_->step(); }

  // Bytes this rank keeps between steps (parameters, gradients, the gradient shard, moments) and
  // the bytes of communication buffers (staging of non-contiguous buckets).
  size_t state_bytes() const;
  size_t buffer_bytes() const;
  // One line for the log: those bytes by kind, against the ZeRO paper's model for the stage
  // (fp32 AdamW: 4Ψ parameters + 4Ψ gradients + 8Ψ moments, the sharded parts divided by N).
  std::string MemoryReport() const;

 private:
  DataParallel(const Config& config, Communicator* comm, Gpt* model);

  const Config& config_;
  Communicator* comm_;
  Gpt* model_;
  std::unique_ptr<AdamW> adam_;
  std::unique_ptr<shard::GradReducer> reducer_;  // zero = 0 on several ranks
  std::unique_ptr<shard::ZeroReducer> zero_;     // zero >= 1 on several ranks
  std::vector<size_t> unit_pending_;             // per unit: tensors not yet ready in this pass
  absl::Status ready_status_;                    // the first error of this pass's TensorReady
};

}  // namespace weft::trainer
