// Portable bit-level conversions between fp32 and the 16-bit formats.
//
// These define the exact results every SIMD level must reproduce: the fp16 ones match what the
// F16C / AVX-512 instructions (vcvtph2ps, vcvtps2ph with round-to-nearest-even) produce, NaN
// payloads included, so scalar and vector paths agree bit for bit:
//   fp16 -> fp32: exact; a NaN keeps sign and payload (shifted up) and gets the quiet bit set.
//   fp32 -> fp16: nearest, ties to even; overflow gives infinity; fp16 subnormals are exact;
//                 a NaN keeps sign and the top 9 payload bits and gets the quiet bit set.
//   bf16 -> fp32: exact, the bits move to the top half (signaling NaNs stay signaling).
//   fp32 -> bf16: nearest, ties to even; a NaN keeps sign and the top payload bits and gets the
//                 quiet bit set.
//
// Only the portable translation units may include this header: the SIMD ones are compiled with
// -mavx2 / -mavx512f, and an inline function emitted there could be the copy the linker keeps.
#pragma once

#include <bit>
#include <cstdint>

namespace weft::kernels_internal {

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise so the leading one becomes the implicit bit.
    uint32_t biased = 113;  // 2^-14 in fp32's bias, before the shifts below.
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --biased;
    }
    bits = sign | (biased << 23) | ((mantissa & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t FloatToHalfBits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  // 0x477FF000 is 65520, halfway between the largest half (65504) and 2^16: it and everything
  // above round to infinity.
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {
    // Normal in fp16: rebias the exponent, then round the 13 dropped bits to nearest-even. A carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = magnitude - 0x38000000u;
    const uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal (or zero) in fp16: the result counts units of 2^-24.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t shift = 126 - exponent;  // >= 14 here, since the value is below 2^-14.
  if (shift >= 25) return static_cast<uint16_t>(sign);  // Below 2^-25: rounds to zero.
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  uint32_t quotient = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (quotient & 1u) != 0)) ++quotient;
  return static_cast<uint16_t>(sign | quotient);
}

inline float BFloat16BitsToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace weft::kernels_internal
