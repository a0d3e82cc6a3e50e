#include "weft/kernels/dtype.h"

#include <array>
#include <utility>

namespace weft {
namespace {

constexpr std::array<std::string_view, kNumDataTypes> kTypeNames = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"};
constexpr std::array<std::string_view, kNumReduceOps> kOpNames = {"sum", "prod", "min", "max",
                                                                  "avg"};

}  // namespace

bool IsFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBFloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

const char* Name(DataType type) {
  return IsValid(type) ? kTypeNames[static_cast<int>(type)].data() : "invalid";
}

const char* Name(ReduceOp op) {
  return IsValid(op) ? kOpNames[static_cast<int>(op)].data() : "invalid";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (kTypeNames[i] == name) return static_cast<DataType>(i);
  }
  static constexpr std::pair<std::string_view, DataType> kAliases[] = {
      {"char", DataType::kInt8},       {"int", DataType::kInt32},
      {"uint", DataType::kUint32},     {"fp16", DataType::kFloat16},
      {"float16", DataType::kFloat16}, {"bf16", DataType::kBFloat16},
      {"fp32", DataType::kFloat32},    {"float32", DataType::kFloat32},
      {"fp64", DataType::kFloat64},    {"float64", DataType::kFloat64},
  };
  for (const auto& [alias, type] : kAliases) {
    if (alias == name) return type;
  }
  return std::nullopt;
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

}  // namespace weft
