// CompressedReduceScatter: each rank's share of the average over a communicator's ranks of an
// fp32 array, with every byte on the wire compressed by one of compression.h's codecs: the
// gradient reduction of ZeRO-1/2/3 over slow links.
//
//   auto rs = weft::CompressedReduceScatter::Create(comm, count, {weft::Codec::kInt8});
//   absl::Status s = (*rs)->Run(grads, slice);  // slice[0, chunk()): this rank's averaged chunk
//
// The array (plus this rank's error, below) is cut into N chunks of chunk() = ceil(count / N)
// elements, the last padded with zeros, and every chunk other than rank r's own crosses the wire
// encoded, one of two ways:
//   direct  chunk c is encoded and sent to rank c in one all-to-all; rank c decodes and adds the
//           N chunks it received in rank order into zeros and multiplies by 1/N. One encoding
//           per element, one exchange.
//   ring    N−1 steps around the ring of ranks: rank r encodes its chunk r−1 and sends it to
//           r+1; at each later step it decodes what came from r−1 (chunk r−1−s: the partial sum
//           of the ranks before it), adds its own chunk, re-encodes and passes it on; at the end
//           it decodes the partial sum of chunk r, adds its own chunk r and multiplies by 1/N.
//           Each partial sum is re-encoded at every hop, so it adds N−2 encodings' errors, but
//           across nodes only one message leaves a node at a time.
// Both send N−1 encoded chunks per rank, the codec's ratio of a ring reduce-scatter's bytes. The
// choice (CompressionOptions::scatter; kAuto) is the cost model's: the ring when the
// communicator predicts a ring all-gather of the encoded chunks to be faster than the all-to-all
// it would run for them (over nodes where a lone flow outruns every rank sending at once), else
// direct; every rank computes the same prediction from the model they share, so no agreement is
// needed. Top-k sends the k = ceil(topk_ratio · chunk()) largest entries of each encoded chunk,
// with indices inside the chunk.
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
#include <string>
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
  // Whether the ring runs (else the direct all-to-all).
  bool ring() const { return ring_; }

  // slice[0, chunk()) := the average over the ranks of their chunk rank() of data[0, count) (see
  // the top of this file). `slice` may lie inside `data` (ZeRO's in-place reduce-scatter):
  // `data` is read whole before `slice` is written. Errors: a failed or late collective (naming
  // the rank and the call), or data with infinities or NaNs: those are sent as zeros, the
  // collective completes on every rank, and the ranks that had them return FailedPrecondition
  // (the ring's own chunk, which is added rather than encoded, too).
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
  // The two paths: encode, move and sum into `slice`; the count of non-finite inputs.
  absl::StatusOr<size_t> RunDirect(float* slice);
  absl::StatusOr<size_t> RunRing(float* slice);
  absl::Status Failed(const absl::Status& s, const std::string& what) const;

  Communicator* comm_;
  size_t count_;
  CompressionOptions options_;
  int ranks_;
  size_t chunk_;
  bool ring_ = false;
  std::unique_ptr<ChunkCodec> codec_;
  std::vector<float> staged_, worker_error_, partial_;  // partial_: the ring's running sum
  std::vector<uint8_t> send_, recv_;
  uint64_t runs_ = 0;
  uint64_t wire_bytes_ = 0, uncompressed_bytes_ = 0;
};

}  // namespace weft
