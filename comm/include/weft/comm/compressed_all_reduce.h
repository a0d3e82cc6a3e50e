// CompressedAllReduce: the average over a communicator's ranks of an fp32 array, with every byte
// on the wire compressed by one of kernels/codec.h's codecs (or a 16-bit cast): what gradient
// compression sends between nodes over slow links.
//
//   auto reduce = weft::CompressedAllReduce::Create(comm, count, {weft::Codec::kInt8});
//   absl::Status s = (*reduce)->Run(grads);   // grads: the compressed average, on every rank
//
// fp16, bf16, int8, sign: a CompressedReduceScatter (compressed_reduce_scatter.h: chunk c's
// average lands on rank c, by the direct all-to-all or the ring as options.scatter or the cost
// model says), then rank c encodes that average (plus its second error) and an all-gather gives
// every rank every encoded average, which it decodes.
// Each rank sends 2·(N−1) encoded chunks: the codec's ratio of a ring all-reduce's bytes.
// top-k: each rank encodes the k = ceil(topk_ratio · count) entries of largest magnitude (plus
// its error); an all-gather of the (index, value) pairs; every rank adds the N ranks' entries in
// rank order into zeros and multiplies by 1/N. Each rank sends (N−1)·8·k bytes.
//
// Error feedback (int8, sign, top-k): what a rank's encoding leaves out of its chunks (the worker
// error, `count` floats) and of its averaged chunk (the server error, one chunk) is added before
// the next Run's encoding, as 1-bit Adam's compressed all-reduce does, so the sum over steps of
// what arrives tracks the sum of what was meant. The state lives in this object: keep one per
// gradient bucket, and save it with a checkpoint (errors(), RestoreErrors). fp16 and bf16 round
// to nearest-even and keep no state.
//
// The result is the same bits on every rank and in every run: each element is computed by the
// documented sequence of codec calls, in rank order. Collective: every rank calls Create and Run
// with the same count and options. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_reduce_scatter.h"
#include "weft/comm/compression.h"

namespace weft {

class CompressedAllReduce {
 public:
  // InvalidArgument for count 0, a zero block or a top-k ratio outside (0, 1]. `comm` must
  // outlive the result.
  static absl::StatusOr<std::unique_ptr<CompressedAllReduce>> Create(
      Communicator* comm, size_t count, const CompressionOptions& options);
  ~CompressedAllReduce();

  // data[0, count) := the compressed average over the ranks (see the top of this file). Errors:
  // a failed or late collective (naming the rank and the call), or data with infinities or NaNs:
  // those are sent as zeros, the collectives complete on every rank, and the ranks that had them
  // return FailedPrecondition (a caller skips such a step).
  absl::Status Run(float* data);

  // Bytes this rank has sent so far, and what an uncompressed fp32 ring all-reduce would have
  // sent for the same calls (2·(N−1)/N of the array each).
  uint64_t wire_bytes() const;
  uint64_t uncompressed_bytes() const { return uncompressed_bytes_; }
  // Whether the reduce-scatter half runs on the ring (never for top-k).
  bool ring() const { return scatter_ != nullptr && scatter_->ring(); }

  // The error-feedback state (worker error, then server error; empty for fp16 and bf16), and
  // its restore from a checkpoint (the same sizes, else InvalidArgument).
  std::vector<float> errors() const;
  absl::Status RestoreErrors(const std::vector<float>& errors);

 private:
  CompressedAllReduce(Communicator* comm, size_t count, const CompressionOptions& options);
  absl::Status RunChunked(float* data);
  absl::Status RunTopK(float* data);
  absl::Status Gather(const uint8_t* send, uint8_t* recv, size_t bytes, const char* what);

  Communicator* comm_;
  size_t count_;
  CompressionOptions options_;
  int ranks_;
  std::unique_ptr<CompressedReduceScatter> scatter_;  // all but top-k: the first half
  std::unique_ptr<ChunkCodec> codec_;                 // one chunk's codec (top-k: the array's)
  // The all-gather half's error feedback (one chunk), or top-k's (the whole array).
  std::vector<float> error_, sum_, staged_;
  std::vector<uint8_t> encoded_, gathered_;
  uint64_t runs_ = 0;
  uint64_t gathered_bytes_ = 0, uncompressed_bytes_ = 0;
};

}  // namespace weft
