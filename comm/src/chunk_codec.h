// ChunkCodec: one codec (compression.h) bound to one array length, for the compressed
// collectives: every encoded chunk of a collective has the same length and so the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weft/comm/compression.h"

namespace weft {

// InvalidArgument unless count, the block and the top-k ratio (in (0, 1]) are usable: the
// compressed collectives' Create checks.
absl::Status CheckCompressionArguments(size_t count, const CompressionOptions& options);

class ChunkCodec {
 public:
  // `n` elements a chunk; top-k sends k = min(n, ceil(topk_ratio * n)) of them.
  ChunkCodec(const CompressionOptions& options, size_t n);

  size_t n() const { return n_; }
  size_t k() const { return k_; }
  // Whether the codec keeps error feedback (int8, sign, top-k).
  bool has_feedback() const;
  // The exact encoded size of one chunk.
  size_t bytes() const;
  // Encodes x[0, n) (plus `error`, which the codec updates; ignored without feedback) into
  // bytes() at `out`. Returns how many elements were infinite or NaN (sent as zeros).
  absl::StatusOr<size_t> Encode(const float* x, float* error, uint8_t* out);
  // out[0, n) += the decode of bytes() at `in`.
  absl::Status DecodeAdd(const uint8_t* in, float* out);

 private:
  CompressionOptions options_;
  size_t n_, k_;
  std::vector<uint16_t> narrow_;  // fp16/bf16: one chunk's 16-bit values (aligned)
  std::vector<float> wide_;
};

}  // namespace weft
