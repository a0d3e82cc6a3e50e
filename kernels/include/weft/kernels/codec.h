// Gradient-compression codecs: int8 blockwise, 1-bit sign with a per-block scale, and top-k, each
// with an error-feedback encoder and the decode-and-add form a compressed reduce-scatter hop uses.
//
// Inputs are fp32 arrays of n elements. The encoded forms carry neither n nor the block size:
// sender and receiver agree on both, and the *EncodedBytes functions give the exact sizes.
//
// Non-finite inputs. Every encoder treats a NaN or infinite input element (after the error is
// added, for the *WithFeedback forms) as +0 and returns how many there were, so a caller can skip
// a step whose gradients overflowed while the encoded bytes stay well defined and finite.
//
// Error feedback. The *WithFeedback encoders take an error array `error` of n elements, encode
// v = x + error (rounded to fp32) and leave error = v' - decode(encoded), where v' is v with its
// non-finite elements replaced by +0: whatever a step does not transmit is added to the next.
// The new error is computed in the same pass as the encoding.
//
// SIMD. The int8 and sign encoders and decoders run at the level ActiveSimdLevel() picks
// (reduce.h); every level produces the same bytes and the same floats, bit for bit.
//
// Argument errors (a zero block, a null pointer with n > 0, k > n, an index out of range) return
// InvalidArgument naming the function and the argument, and leave every output untouched.
// The functions share no state and may run concurrently on distinct buffers; x, error, the
// encoded buffer and out must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// Elements per scale in the int8 and sign codecs unless the caller says otherwise. Any positive
// block size is accepted; multiples of 16 run fastest.
inline constexpr size_t kCodecDefaultBlock = 256;

// ---------------------------------------------------------------------------------------------
// int8 blockwise.
//
// The input is cut into ceil(n / block) blocks of `block` elements (the last one may be shorter).
// Per block, m = max |x| over the block and scale = fl(m / 127), except that when 127 * scale
// would round to infinity (only m = FLT_MAX) scale is the next fp32 toward zero. Each element is
// q = clamp(round_nearest_even(fl(x / scale)), -127, 127), or q = 0 when scale is 0 (an all-zero
// block, or m <= 63 * 2^-149 so that m / 127 underflows). Decoding gives fl(q * scale).
//
// Bound, proved in codec.cc and checked by the tests: for every element,
//   |x - decode(x)| <= scale * (1/2 + 2^-16) + 2^-142,
// where the 2^-142 term only matters when scale is subnormal or zero (m < 127 * 2^-126); for
// normal scales the bound is scale * (1/2 + 2^-16). Signs are kept: -0 decodes to +0.
//
// Layout (Int8EncodedBytes(n, block) bytes): the ceil(n / block) scales as little-endian fp32,
// block 0 first, then the n values q as int8, in element order. No padding, no alignment needed.
// ---------------------------------------------------------------------------------------------

// 4 * ceil(n / block) + n; 0 when block is 0.
size_t Int8EncodedBytes(size_t n, size_t block = kCodecDefaultBlock);

// Writes Int8EncodedBytes(n, block) bytes to `out`. Returns the count of non-finite inputs.
absl::StatusOr<size_t> EncodeInt8(const float* x, size_t n, uint8_t* out,
                                  size_t block = kCodecDefaultBlock);

// EncodeInt8 of x + error, leaving error = (x + error)' - decode (see the top of this file).
absl::StatusOr<size_t> EncodeInt8WithFeedback(const float* x, float* error, size_t n, uint8_t* out,
                                              size_t block = kCodecDefaultBlock);

// out[i] = decode of element i of `in`, which holds Int8EncodedBytes(n, block) bytes.
absl::Status DecodeInt8(const uint8_t* in, size_t n, float* out, size_t block = kCodecDefaultBlock);

// out[i] = out[i] + decode of element i (the decoded value is rounded to fp32 first).
absl::Status DecodeAddInt8(const uint8_t* in, size_t n, float* out,
                           size_t block = kCodecDefaultBlock);

// ---------------------------------------------------------------------------------------------
// 1-bit sign with a per-block scale.
//
// Blocks as for int8. Per block, scale = mean |x| over the block's elements: the |x| are summed in
// fp64 into 16 partial sums (element j of the block into sum j mod 16, in order), the partial
// sums are combined pairwise (sum[j] += sum[j + w] for w = 8, 4, 2, 1), the total is divided by
// the block's length in fp64 and rounded once to fp32; it is finite and never overflows. Each
// element is one bit, 1 when x >= 0 (so -0 and +0 give 1), and decodes to +scale or -scale.
//
// Layout (SignEncodedBytes(n, block) bytes): the ceil(n / block) scales as little-endian fp32,
// then the bits of each block in turn, ceil(length / 8) bytes a block: element j of a block is
// bit (j mod 8) of the block's byte j / 8 (least significant bit first). Each block starts on a
// byte boundary, and the unused high bits of a block's last byte are 0.
// ---------------------------------------------------------------------------------------------

// 4 * ceil(n / block) + (n / block) * ceil(block / 8) + ceil((n mod block) / 8); 0 when block is 0.
size_t SignEncodedBytes(size_t n, size_t block = kCodecDefaultBlock);

// Writes SignEncodedBytes(n, block) bytes to `out`. Returns the count of non-finite inputs.
absl::StatusOr<size_t> EncodeSign(const float* x, size_t n, uint8_t* out,
                                  size_t block = kCodecDefaultBlock);

// EncodeSign of x + error, leaving error = (x + error)' -+ scale (see the top of this file).
absl::StatusOr<size_t> EncodeSignWithFeedback(const float* x, float* error, size_t n, uint8_t* out,
                                              size_t block = kCodecDefaultBlock);

// out[i] = +scale or -scale of element i's block, from SignEncodedBytes(n, block) bytes at `in`.
absl::Status DecodeSign(const uint8_t* in, size_t n, float* out, size_t block = kCodecDefaultBlock);

// out[i] = out[i] + (+scale or -scale).
absl::Status DecodeAddSign(const uint8_t* in, size_t n, float* out,
                           size_t block = kCodecDefaultBlock);

// ---------------------------------------------------------------------------------------------
// Top-k.
//
// The k elements of largest |x| (non-finite ones counting as +0), ties broken toward the lower
// index, sent as (index, value) pairs in increasing index order with their exact fp32 values.
// Selection finds the k-th largest magnitude with a radix histogram and a selection among the
// elements of one histogram bucket, then one pass emits the entries: O(n) expected time and
// O(n) scratch in the worst case (all magnitudes in one bucket), deterministic for given inputs.
//
// Layout (TopKEncodedBytes(k) bytes): k TopKEntry records as laid out in memory (host byte order,
// which is little-endian on every supported target): uint32 index, then fp32 value.
// ---------------------------------------------------------------------------------------------

struct TopKEntry {
  uint32_t index;
  float value;
};
static_assert(sizeof(TopKEntry) == 8, "TopKEntry is the 8-byte wire record");

// The largest n a top-k encoder accepts: every index fits in uint32.
inline constexpr size_t kTopKMaxElements = size_t{1} << 32;

// 8 * k.
size_t TopKEncodedBytes(size_t k);

// Writes the k entries to out[0..k). Returns the count of non-finite inputs. Errors: k > n,
// n > kTopKMaxElements.
absl::StatusOr<size_t> EncodeTopK(const float* x, size_t n, size_t k, TopKEntry* out);

// EncodeTopK of x + error, leaving error 0 at the sent indices and x + error (non-finite: 0)
// elsewhere: the untransmitted remainder waits for a later step.
absl::StatusOr<size_t> EncodeTopKWithFeedback(const float* x, float* error, size_t n, size_t k,
                                              TopKEntry* out);

// out[0..n) = 0, then out[index] = value for each of the k entries (a repeated index keeps the
// last value). Errors: an index >= n (nothing is written then).
absl::Status DecodeTopK(const TopKEntry* in, size_t k, size_t n, float* out);

// out[index] = out[index] + value for each entry in order. Errors as DecodeTopK.
absl::Status DecodeAddTopK(const TopKEntry* in, size_t k, size_t n, float* out);

}  // namespace weft
