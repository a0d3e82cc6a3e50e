#include "tensor_parallel.h"

#include <cstring>
#include <utility>

namespace weft::trainer {

TensorParallel::TensorParallel(Communicator* comm, bool sequence_parallel, absl::Duration timeout)
    : comm_(comm), sequence_parallel_(sequence_parallel), timeout_(timeout) {}

void TensorParallel::Finish(Work work) {
  absl::Status s = work.Wait(timeout_);
  if (!s.ok() && error_.ok()) error_ = std::move(s);
}

void TensorParallel::ReduceFromRegion(float* x, size_t n) {
  if (size() == 1 || !error_.ok()) return;
  bytes_sent_ += 2 * n * sizeof(float) * (size() - 1) / size();
  Finish(comm_->AllReduce(x, x, n, DataType::kFloat32, ReduceOp::kSum));
}

void TensorParallel::MaxFromRegion(float* x, size_t n) {
  if (size() == 1 || !error_.ok()) return;
  bytes_sent_ += 2 * n * sizeof(float) * (size() - 1) / size();
  Finish(comm_->AllReduce(x, x, n, DataType::kFloat32, ReduceOp::kMax));
}

void TensorParallel::ReduceScatterToSequence(const float* full, float* shard, size_t rows,
                                             size_t cols) {
  const size_t count = rows / size() * cols;
  if (size() == 1) {
    std::memcpy(shard, full, count * sizeof(float));
    return;
  }
  if (!error_.ok()) return;
  bytes_sent_ += rows * cols * sizeof(float) * (size() - 1) / size();
  Finish(comm_->ReduceScatter(full, shard, count, DataType::kFloat32, ReduceOp::kSum));
}

void TensorParallel::GatherFromSequence(const float* shard, float* full, size_t rows, size_t cols) {
  const size_t count = rows / size() * cols;
  if (size() == 1) {
    std::memcpy(full, shard, count * sizeof(float));
    return;
  }
  if (!error_.ok()) return;
  bytes_sent_ += rows * cols * sizeof(float) * (size() - 1) / size();
  Finish(comm_->AllGather(shard, full, count, DataType::kFloat32));
}

absl::Status TensorParallel::TakeError() { return std::exchange(error_, absl::OkStatus()); }

uint64_t TensorParallel::TakeBytesSent() { return std::exchange(bytes_sent_, 0); }

}  // namespace weft::trainer
