// How the portable kernels store, widen and combine each element type.
//
// A storage type is loaded into a compute type (fp16 and bf16 widen to fp32, everything else is
// itself), combined there, and stored back (fp16 and bf16 round to nearest-even). The combining
// rules below, with a the accumulated (left) operand and b the incoming one, are the definitions
// every SIMD level must match bit for bit:
//
// - sum, prod: integers wrap modulo 2^bits; floats use one IEEE operation per element.
// - min: a < b ? a : b, which is exactly what vminps / vminpd compute: b when either operand is
//   NaN, and the second zero for min(-0, +0).
// - max: a > b ? a : b, likewise exactly vmaxps / vmaxpd.
//
// Only portable translation units may include this header (see half_bits.h for why).
#pragma once

#include <cstdint>
#include <type_traits>

#include "half_bits.h"
#include "weft/kernels/dtype.h"

namespace weft::kernels_internal {

template <typename T>
struct PlainElement {
  using Storage = T;
  using Compute = T;
  static Compute Load(Storage s) { return s; }
  static Storage Store(Compute c) { return c; }
};

struct HalfElement {
  using Storage = uint16_t;
  using Compute = float;
  static Compute Load(Storage s) { return HalfBitsToFloat(s); }
  static Storage Store(Compute c) { return FloatToHalfBits(c); }
};

struct BFloat16Element {
  using Storage = uint16_t;
  using Compute = float;
  static Compute Load(Storage s) { return BFloat16BitsToFloat(s); }
  static Storage Store(Compute c) { return FloatToBFloat16Bits(c); }
};

template <DataType kType>
struct ElementFor;
template <>
struct ElementFor<DataType::kInt8> : PlainElement<int8_t> {};
template <>
struct ElementFor<DataType::kUint8> : PlainElement<uint8_t> {};
template <>
struct ElementFor<DataType::kInt32> : PlainElement<int32_t> {};
template <>
struct ElementFor<DataType::kUint32> : PlainElement<uint32_t> {};
template <>
struct ElementFor<DataType::kInt64> : PlainElement<int64_t> {};
template <>
struct ElementFor<DataType::kUint64> : PlainElement<uint64_t> {};
template <>
struct ElementFor<DataType::kFloat16> : HalfElement {};
template <>
struct ElementFor<DataType::kBFloat16> : BFloat16Element {};
template <>
struct ElementFor<DataType::kFloat32> : PlainElement<float> {};
template <>
struct ElementFor<DataType::kFloat64> : PlainElement<double> {};

// Integer arithmetic goes through an unsigned type at least as wide as int, so that it wraps
// instead of overflowing (signed overflow, and uint8 * uint8 promoted to int, are undefined).
template <typename T>
using WrapType = std::conditional_t<sizeof(T) <= sizeof(uint32_t), uint32_t, uint64_t>;

struct SumOp {
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * b;
    }
  }
};

struct MinOp {
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? a : b;
  }
};

struct MaxOp {
  template <typename T>
  static T Apply(T a, T b) {
    return a > b ? a : b;
  }
};

}  // namespace weft::kernels_internal
