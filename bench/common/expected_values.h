// Inputs whose reductions are exact in every type and independent of the reduction order, and
// their expected results: what lets the collective tests compare bit for bit (as nccl-tests do).
//
// Sums use small integers (exact in fp16 and bf16 for up to 8 ranks, negative for signed types);
// products use 1, 2 and -1, so every partial product is a power of two; min and max use a wider
// range of integers. Integer types wrap exactly like the kernels do. Every rank's inputs differ
// from every other's (up to 9 ranks for products, 25 for sums, 101 for min and max), so a rank's
// data standing in for another's changes the result.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "weft/kernels/convert.h"
#include "weft/kernels/dtype.h"

namespace weft::testing {

inline bool IsSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 ||
         IsFloatingPoint(t);
}

// The input value of `rank` at global element `index` for reduction `op`.
inline int64_t InputValue(DataType type, ReduceOp op, int rank, uint64_t index) {
  const bool sign = IsSigned(type);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      // rank / 5 tells ranks r and r + 5 apart, which rank * 3 % 5 alone does not.
      return static_cast<int64_t>((rank * 3 + index * 7 + (rank / 5) * index) % 5) - (sign ? 2 : 0);
    case ReduceOp::kProd:
      // 4 * rank % 9 differs on each of 9 ranks; at most 3 of them hold a 2 at any index.
      if ((rank * 4 + index) % 9 < 3) return 2;
      return (sign && (rank * 5 + index) % 4 == 0) ? -1 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<int64_t>((rank * 37 + index * 11) % 101) - (sign ? 50 : 0);
  }
  return 0;
}

// Stores integer `v` as one element of `type` at `out`. Wraps for narrow integers.
inline void Store(DataType type, int64_t v, void* out) {
  switch (type) {
    case DataType::kInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(out, &x, 1);
      break;
    }
    case DataType::kUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(out, &x, 1);
      break;
    }
    case DataType::kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case DataType::kUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case DataType::kInt64: {
      std::memcpy(out, &v, 8);
      break;
    }
    case DataType::kUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(out, &x, 8);
      break;
    }
    case DataType::kFloat16: {
      uint16_t x = FloatToHalf(static_cast<float>(v));
      std::memcpy(out, &x, 2);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t x = FloatToBFloat16(static_cast<float>(v));
      std::memcpy(out, &x, 2);
      break;
    }
    case DataType::kFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case DataType::kFloat64: {
      double x = static_cast<double>(v);
      std::memcpy(out, &x, 8);
      break;
    }
  }
}

// The expected result bytes of reducing InputValue over `ranks` ranks at `index`.
inline void StoreExpected(DataType type, ReduceOp op, int ranks, uint64_t index, void* out) {
  int64_t acc = InputValue(type, op, 0, index);
  uint64_t wrapped = static_cast<uint64_t>(acc);  // products wrap like the integer kernels
  for (int r = 1; r < ranks; ++r) {
    const int64_t v = InputValue(type, op, r, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        wrapped *= static_cast<uint64_t>(v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kProd) acc = static_cast<int64_t>(wrapped);
  if (op != ReduceOp::kAvg) {
    if (op == ReduceOp::kProd && IsFloatingPoint(type)) {
      // Floats do not wrap: recompute exactly (powers of two and signs).
      double p = 1;
      for (int r = 0; r < ranks; ++r) p *= static_cast<double>(InputValue(type, op, r, index));
      acc = static_cast<int64_t>(p);
    }
    Store(type, acc, out);
    return;
  }
  switch (type) {
    case DataType::kFloat16: {
      uint16_t x = FloatToHalf(static_cast<float>(acc) / static_cast<float>(ranks));
      std::memcpy(out, &x, 2);
      return;
    }
    case DataType::kBFloat16: {
      uint16_t x = FloatToBFloat16(static_cast<float>(acc) / static_cast<float>(ranks));
      std::memcpy(out, &x, 2);
      return;
    }
    case DataType::kFloat32: {
      float x = static_cast<float>(acc) / static_cast<float>(ranks);
      std::memcpy(out, &x, 4);
      return;
    }
    case DataType::kFloat64: {
      double x = static_cast<double>(acc) / ranks;
      std::memcpy(out, &x, 8);
      return;
    }
    default:
      Store(type, acc / ranks, out);  // C++ truncates toward zero, as the kernels do
  }
}

}  // namespace weft::testing
