// TensorParallel: the tensor-parallel group's collectives, named for the role they play in a
// Megatron-style block, so that each appears in the model next to the math it serves.
//
//   column-parallel linear: each rank computes its output features (whole heads, a slice of the
//     MLP's hidden units, a slice of the vocabulary) from the full input;
//   row-parallel linear: each rank multiplies its input features by its columns of the weight,
//     and the partial outputs are summed over the group (ReduceFromRegion, Megatron's g); in
//     backward, the full input's gradient is the sum of the column-parallel layer's partial
//     gradients (ReduceFromRegion again, Megatron's f).
//   sequence parallel: the regions between the linears (LayerNorm, residual adds) hold this rank's
//     share of the B·T token rows only; the sum after a row-parallel linear becomes a
//     reduce-scatter of rows (ReduceScatterToSequence) and the input of a column-parallel one an
//     all-gather of rows (GatherFromSequence), each the other's backward.
//
// A single rank (no communicator) is the trivial group: every call copies or does nothing.
// Errors do not interrupt the model's arithmetic: the first is kept (TakeError after a pass), and
// the calls after it skip communication, so a dead peer ends the pass at the first deadline.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"

namespace weft::trainer {

class TensorParallel {
 public:
  // `comm`: the ranks of this tensor-parallel group, ordered by their share (null: one rank).
  // `sequence_parallel`: the regions between linears are split over the group's token rows.
  TensorParallel(Communicator* comm, bool sequence_parallel, absl::Duration timeout);
  TensorParallel() : TensorParallel(nullptr, false, absl::Seconds(120)) {}

  int size() const { return comm_ == nullptr ? 1 : comm_->size(); }
  int rank() const { return comm_ == nullptr ? 0 : comm_->rank(); }
  bool sequence_parallel() const { return sequence_parallel_ && size() > 1; }
  Communicator* comm() const { return comm_; }

  // Sums `n` floats over the group, in place.
  void ReduceFromRegion(float* x, size_t n);
  // The largest of each of `n` floats over the group, in place.
  void MaxFromRegion(float* x, size_t n);
  // full[rows · cols] summed over the group; this rank keeps rows [rank·rows/size, +rows/size)
  // in shard. rows must be divisible by size().
  void ReduceScatterToSequence(const float* full, float* shard, size_t rows, size_t cols);
  // The inverse shape: every rank's shard of rows/size rows, concatenated in rank order.
  void GatherFromSequence(const float* shard, float* full, size_t rows, size_t cols);

  // The first error since the last call (OK if none).
  absl::Status TakeError();
  // Bytes this rank sent since the last call, counted as a ring sends them: 2(t−1)/t of each
  // all-reduce, (t−1)/t of the full buffer of each reduce-scatter and all-gather.
  uint64_t TakeBytesSent();

 private:
  // Waits for `work` under the deadline, keeping the first error.
  void Finish(Work work);

  Communicator* comm_;
  bool sequence_parallel_;
  absl::Duration timeout_;
  absl::Status error_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace weft::trainer
