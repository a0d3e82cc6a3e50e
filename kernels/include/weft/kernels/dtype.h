// Element types and reduction operators understood by every Weft kernel and collective.
//
// The numbering is part of the wire format (it travels in message envelopes), so append only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class DataType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,   // IEEE 754 binary16
  kBFloat16 = 7,  // bfloat16: the top half of a binary32
  kFloat32 = 8,
  kFloat64 = 9,
};
inline constexpr int kNumDataTypes = 10;

enum class ReduceOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  // Sum divided by the number of ranks. Integer types use truncating division, as NCCL does.
  kAvg = 4,
};
inline constexpr int kNumReduceOps = 5;

inline bool IsValid(DataType type) { return static_cast<unsigned>(type) < kNumDataTypes; }
inline bool IsValid(ReduceOp op) { return static_cast<unsigned>(op) < kNumReduceOps; }

// Size of one element in bytes; 0 for an invalid type. Inline: every call checks its sizes.
inline size_t SizeOf(DataType type) {
  constexpr size_t kSizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return IsValid(type) ? kSizes[static_cast<int>(type)] : 0;
}

bool IsFloatingPoint(DataType type);

// The names nccl-tests prints: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
// "bfloat16", "float", "double".
const char* Name(DataType type);
// "sum", "prod", "min", "max", "avg".
const char* Name(ReduceOp op);

// Accepts the nccl-tests names and common aliases ("fp16", "float16", "bf16", "fp32", "float32",
// "fp64", "float64", "char", "int", "uint").
std::optional<DataType> ParseDataType(std::string_view name);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

}  // namespace weft
