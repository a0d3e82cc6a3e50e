// CompressedReduceScatter: each rank's share of the average over a communicator's ranks of an
// fp32 array, with every byte on the wire compressed by one of compression.h's codecs: the
// gradient reduction of ZeRO-1/2/3 over slow links.
//
//   auto rs = weft::CompressedReduceScatter::Create(comm, count, {weft::Codec::kInt8});
//   absl::Status s = (*rs)->Run(grads, slice);  // slice[0, chunk()): this rank's averaged chunk
//
// The array (plus this rank's error, below) is cut into N chunks of chunk() = ceil(count / N)
// elements, the last padded with zeros; chunk c is encoded and sent to rank c in one all-to-all;
// rank c decodes and adds the N chunks it received in rank order into zeros and multiplies by
// 1/N. Each rank sends N−1 encoded chunks, the codec's ratio of a ring reduce-scatter's bytes, in
// one exchange and with one encoding per element: a ring that decodes, adds and re-encodes at
// each of its N−1 hops sends the same bytes in N−1 dependent steps and adds an encoding error at
// every hop. Top-k sends the k = ceil(topk_ratio · chunk()) largest entries of each chunk, with
// indices inside the chunk.
//
// Error feedback (int8, sign, top-k): what a rank's encoding leaves out of each chunk (the
// worker error, N·chunk() floats) is added before the next Run's encoding, so the sum over calls
// of what arrives tracks the sum of what was meant. Keep one object per gradient bucket, and save
// its errors() with a checkpoint. fp16 and bf16 round to nearest-even and keep no state.
//
// The result is the same bits on every rank and in every run. Collective: every rank calls
// Create and Run with the same count and options. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compression.h"

namespace weft {

class ChunkCodec;

class CompressedReduceScatter {
 public:
  // InvalidArgument for count 0, a zero block or a top-k ratio outside (0, 1]. `comm` must
  // outlive the result.
  static absl::StatusOr<std::unique_ptr<CompressedReduceScatter>> Create(
      Communicator* comm, size_t count, const CompressionOptions& options);
  ~CompressedReduceScatter();

  // Elements of each rank's chunk (the last rank's chunk past `count` is padding).
  size_t chunk() const { return chunk_; }

  // slice[0, chunk()) := the average over the ranks of their chunk rank() of data[0, count) (see
  // the top of this file). `slice` may lie inside `data` (ZeRO's in-place reduce-scatter):
  // `data` is read whole before `slice` is written. Errors: a failed or late collective (naming
  // the rank and the call), or data with infinities or NaNs: those are sent as zeros, the
  // collective completes on every rank, and the ranks that had them return FailedPrecondition.
  absl::Status Run(const float* data, float* slice);

  // Bytes this rank has sent so far, and what an uncompressed fp32 ring reduce-scatter would have
  // sent for the same calls ((N−1)/N of the array each).
  uint64_t wire_bytes() const { return wire_bytes_; }
  uint64_t uncompressed_bytes() const { return uncompressed_bytes_; }

  // The worker error (N·chunk() floats; empty for fp16 and bf16), and its restore from a
  // checkpoint (the same size, else InvalidArgument).
  const std::vector<float>& errors() const { return worker_error_; }
  absl::Status RestoreErrors(const std::vector<float>& errors);

 private:
  CompressedReduceScatter(Communicator* comm, size_t count, const CompressionOptions& options);

  Communicator* comm_;
  size_t count_;
  CompressionOptions options_;
  int ranks_;
  size_t chunk_;
  std::unique_ptr<ChunkCodec> codec_;
  std::vector<float> staged_, worker_error_;
  std::vector<uint8_t> send_, recv_;
  uint64_t runs_ = 0;
  uint64_t wire_bytes_ = 0, uncompressed_bytes_ = 0;
};

}  // namespace weft
