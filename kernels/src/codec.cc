// The int8 and sign codecs' public entry points: argument checks, the encoded layout, and the
// dispatch to the active SIMD level's codec loops (codec_kernels.h).
//
// The int8 bound (codec.h). Let u = 2^-24, m = max |x| over a block, s its scale, q an element's
// code and d = fl(q s) its decoding; fl rounds to nearest, with |fl(y) - y| <= max(u|y|, 2^-150).
//  - s = 0 (m / 127 <= 2^-150): q = d = 0 and |x - d| <= m < 2^-143.
//  - Otherwise |fl(x/s) - x/s| <= u|x|/s + 2^-150. When no clamping happens,
//    |x/s - q| <= 1/2 + u|x|/s + 2^-150, so |x - q s| <= s/2 + u m + 2^-150 s. When q is clamped
//    to +-127, |x/s| > 127 and |x - q s| = |x| - 127 s <= m - 127 s <= 127 |m/127 - s|, which is
//    at most 127 * 1.5 ulp(s) < s/4 (one rounding, plus the FLT_MAX step) or 127 * 2^-150.
//  - |d - q s| <= max(127 u s, 2^-150).
// With a normal s, m <= 127 s (1 + 2^-22), so the total is below s/2 + 254 u s (1 + 2^-22) + 2^-150
// s < s (1/2 + 2^-16). With a subnormal s (s < 2^-126), m <= 127 (s + 2^-150), so u m and |d - q s|
// are each below 127 * 2^-150 and the total is below s/2 + 2^-142.
#include "weft/kernels/codec.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec_kernels.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

using kernels_internal::CodecKernels;

const CodecKernels& ActiveCodecKernels() {
  switch (ActiveSimdLevel()) {
    case SimdLevel::kAvx512:
      return kernels_internal::kAvx512CodecKernels;
    case SimdLevel::kAvx2:
      return kernels_internal::kAvx2CodecKernels;
    case SimdLevel::kScalar:
      break;
  }
  return kernels_internal::kScalarCodecKernels;
}

size_t Blocks(size_t n, size_t block) { return (n + block - 1) / block; }

// The checks every blockwise entry point shares: a positive block, and real buffers when there
// is anything to read or write.
absl::Status CheckBlockwise(const char* function, const void* input, const void* output, size_t n,
                            size_t block) {
  if (block == 0) {
    return absl::InvalidArgumentError(std::string(function) + ": block is 0 (must be positive)");
  }
  if (n > 0 && (input == nullptr || output == nullptr)) {
    return absl::InvalidArgumentError(std::string(function) + ": null buffer for " +
                                      std::to_string(n) + " elements");
  }
  return absl::OkStatus();
}

// Which blockwise codec an entry point serves: its kernels and the size of its payload.
enum class Codec { kInt8, kSign };

absl::StatusOr<size_t> Encode(Codec codec, const char* function, const float* x, float* error,
                              bool feedback, size_t n, uint8_t* out, size_t block) {
  if (absl::Status status = CheckBlockwise(function, x, out, n, block); !status.ok()) {
    return status;
  }
  if (feedback && n > 0 && error == nullptr) {
    return absl::InvalidArgumentError(std::string(function) + ": null error array");
  }
  if (n == 0) return size_t{0};
  const CodecKernels& kernels = ActiveCodecKernels();
  uint8_t* payload = out + 4 * Blocks(n, block);
  return (codec == Codec::kInt8 ? kernels.encode_int8 : kernels.encode_sign)(x, error, n, block,
                                                                             out, payload);
}

absl::Status Decode(Codec codec, const char* function, const uint8_t* in, size_t n, float* out,
                    size_t block, bool add) {
  if (absl::Status status = CheckBlockwise(function, in, out, n, block); !status.ok()) {
    return status;
  }
  if (n == 0) return absl::OkStatus();
  const CodecKernels& kernels = ActiveCodecKernels();
  const uint8_t* payload = in + 4 * Blocks(n, block);
  (codec == Codec::kInt8 ? kernels.decode_int8 : kernels.decode_sign)(in, payload, n, block, out,
                                                                      add);
  return absl::OkStatus();
}

}  // namespace

size_t Int8EncodedBytes(size_t n, size_t block) {
  return block == 0 ? 0 : 4 * Blocks(n, block) + n;
}

absl::StatusOr<size_t> EncodeInt8(const float* x, size_t n, uint8_t* out, size_t block) {
  return Encode(Codec::kInt8, "EncodeInt8", x, nullptr, false, n, out, block);
}

absl::StatusOr<size_t> EncodeInt8WithFeedback(const float* x, float* error, size_t n, uint8_t* out,
                                              size_t block) {
  return Encode(Codec::kInt8, "EncodeInt8WithFeedback", x, error, true, n, out, block);
}

absl::Status DecodeInt8(const uint8_t* in, size_t n, float* out, size_t block) {
  return Decode(Codec::kInt8, "DecodeInt8", in, n, out, block, false);
}

absl::Status DecodeAddInt8(const uint8_t* in, size_t n, float* out, size_t block) {
  return Decode(Codec::kInt8, "DecodeAddInt8", in, n, out, block, true);
}

size_t SignEncodedBytes(size_t n, size_t block) {
  if (block == 0) return 0;
  return 4 * Blocks(n, block) + (n / block) * ((block + 7) / 8) + (n % block + 7) / 8;
}

absl::StatusOr<size_t> EncodeSign(const float* x, size_t n, uint8_t* out, size_t block) {
  return Encode(Codec::kSign, "EncodeSign", x, nullptr, false, n, out, block);
}

absl::StatusOr<size_t> EncodeSignWithFeedback(const float* x, float* error, size_t n, uint8_t* out,
                                              size_t block) {
  return Encode(Codec::kSign, "EncodeSignWithFeedback", x, error, true, n, out, block);
}

absl::Status DecodeSign(const uint8_t* in, size_t n, float* out, size_t block) {
  return Decode(Codec::kSign, "DecodeSign", in, n, out, block, false);
}

absl::Status DecodeAddSign(const uint8_t* in, size_t n, float* out, size_t block) {
  return Decode(Codec::kSign, "DecodeAddSign", in, n, out, block, true);
}

}  // namespace weft
