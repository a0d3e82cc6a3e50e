// Reference arithmetic for the kernel tests, written independently of kernels/src: conversions
// search the exact values of every representable result instead of manipulating bits, and the
// reductions are plain one-element-at-a-time loops over these conversions.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "weft/kernels/dtype.h"
#include "weft/kernels/reduce.h"

namespace weft::testing {

inline float RefHalfToFloat(uint16_t h) {
  const bool negative = (h & 0x8000) != 0;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  if (exponent == 0x1F && mantissa != 0) {
    // NaN: the payload moves to the top of fp32's mantissa and the result is quiet.
    return std::bit_cast<float>((negative ? 0x80000000u : 0u) | 0x7FC00000u |
                                (static_cast<uint32_t>(mantissa) << 13));
  }
  double magnitude;
  if (exponent == 0x1F) {
    magnitude = INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return static_cast<float>(negative ? -magnitude : magnitude);
}

// Rounds a non-negative finite-or-infinite magnitude to the nearest entry of `values` (sorted,
// exact, the last one standing for infinity at the first unrepresentable power of two), ties to
// the even code.
template <size_t N>
uint16_t NearestCode(double magnitude, const std::array<double, N>& values) {
  if (magnitude >= values.back()) return static_cast<uint16_t>(N - 1);
  const size_t above = std::upper_bound(values.begin(), values.end(), magnitude) - values.begin();
  const size_t below = above - 1;
  if (values[below] == magnitude) return static_cast<uint16_t>(below);
  const double to_below = magnitude - values[below];
  const double to_above = values[above] - magnitude;
  if (to_below < to_above) return static_cast<uint16_t>(below);
  if (to_above < to_below) return static_cast<uint16_t>(above);
  return static_cast<uint16_t>(below % 2 == 0 ? below : above);
}

// The exact values of the half codes 0x0000..0x7C00, with 0x7C00 standing for 2^16.
inline const std::array<double, 0x7C01>& HalfValues() {
  static const auto values = [] {
    std::array<double, 0x7C01> v{};
    for (int code = 0; code < 0x7C00; ++code) v[code] = RefHalfToFloat(static_cast<uint16_t>(code));
    v[0x7C00] = 65536.0;
    return v;
  }();
  return values;
}

inline uint16_t RefFloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = (bits & 0x80000000u) != 0 ? 0x8000 : 0;
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7E00 | ((bits >> 13) & 0x3FF));
  return static_cast<uint16_t>(sign | NearestCode(std::fabs(static_cast<double>(f)), HalfValues()));
}

inline float RefBFloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t RefFloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint16_t sign = (bits & 0x80000000u) != 0 ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(f));
  // The two neighbouring bf16 magnitudes: truncation and one code up (0x7F80, infinity, stands
  // for 2^128).
  const uint16_t low = static_cast<uint16_t>((bits >> 16) & 0x7FFF);
  if (low >= 0x7F80) return static_cast<uint16_t>(sign | 0x7F80);
  const std::array<double, 2> values = {RefBFloat16ToFloat(low), low + 1 == 0x7F80
                                                                     ? std::ldexp(1.0, 128)
                                                                     : RefBFloat16ToFloat(low + 1)};
  if (magnitude == values[0]) return static_cast<uint16_t>(sign | low);
  const double to_low = magnitude - values[0];
  const double to_high = values[1] - magnitude;
  const bool up = to_high < to_low || (to_high == to_low && low % 2 == 1);
  return static_cast<uint16_t>(sign | (up ? low + 1 : low));
}

// One element type as the tests see it: raw storage plus its value in the type reductions
// compute in.
template <typename S, typename C>
struct RefType {
  using Storage = S;
  using Compute = C;
};

template <DataType kType>
struct RefTraits;
template <>
struct RefTraits<DataType::kInt8> : RefType<int8_t, int8_t> {};
template <>
struct RefTraits<DataType::kUint8> : RefType<uint8_t, uint8_t> {};
template <>
struct RefTraits<DataType::kInt32> : RefType<int32_t, int32_t> {};
template <>
struct RefTraits<DataType::kUint32> : RefType<uint32_t, uint32_t> {};
template <>
struct RefTraits<DataType::kInt64> : RefType<int64_t, int64_t> {};
template <>
struct RefTraits<DataType::kUint64> : RefType<uint64_t, uint64_t> {};
template <>
struct RefTraits<DataType::kFloat16> : RefType<uint16_t, float> {};
template <>
struct RefTraits<DataType::kBFloat16> : RefType<uint16_t, float> {};
template <>
struct RefTraits<DataType::kFloat32> : RefType<float, float> {};
template <>
struct RefTraits<DataType::kFloat64> : RefType<double, double> {};

template <DataType kType>
typename RefTraits<kType>::Compute RefLoad(typename RefTraits<kType>::Storage s) {
  if constexpr (kType == DataType::kFloat16) {
    return RefHalfToFloat(s);
  } else if constexpr (kType == DataType::kBFloat16) {
    return RefBFloat16ToFloat(s);
  } else {
    return s;
  }
}

template <DataType kType>
typename RefTraits<kType>::Storage RefStore(typename RefTraits<kType>::Compute c) {
  if constexpr (kType == DataType::kFloat16) {
    return RefFloatToHalf(c);
  } else if constexpr (kType == DataType::kBFloat16) {
    return RefFloatToBFloat16(c);
  } else {
    return c;
  }
}

// a (op) b with a the accumulated operand. Integers wrap; min/max follow `a < b ? a : b`, which
// yields b whenever either operand is NaN.
template <typename C>
C RefCombine(ReduceOp op, C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      case ReduceOp::kProd:
        return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      case ReduceOp::kMin:
        return std::min(a, b);
      case ReduceOp::kMax:
        return std::max(a, b);
    }
  } else {
    const bool unordered = std::isnan(a) || std::isnan(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return a + b;
      case ReduceOp::kProd:
        return a * b;
      case ReduceOp::kMin:
        return unordered ? b : (a < b ? a : b);
      case ReduceOp::kMax:
        return unordered ? b : (a > b ? a : b);
    }
  }
  return a;
}

// Every SIMD level; the ones this CPU lacks are skipped by the tests that iterate over them.
inline constexpr std::array<SimdLevel, 3> kAllLevels = {SimdLevel::kScalar, SimdLevel::kAvx2,
                                                        SimdLevel::kAvx512};

inline bool CpuSupports(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return true;
    case SimdLevel::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case SimdLevel::kAvx512:
      return CpuSupports(SimdLevel::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

// Compares storage bit for bit (so NaN payloads and signed zeros count).
template <typename S>
bool SameBits(S x, S y) {
  return std::memcmp(&x, &y, sizeof(S)) == 0;
}

}  // namespace weft::testing
