#include "dtypes.h"

#include <iterator>

namespace weft::torch_backend {

std::optional<DataType> ToWeftType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return DataType::kFloat32;
    case c10::ScalarType::Double:
      return DataType::kFloat64;
    case c10::ScalarType::Half:
      return DataType::kFloat16;
    case c10::ScalarType::BFloat16:
      return DataType::kBFloat16;
    case c10::ScalarType::Char:
      return DataType::kInt8;
    case c10::ScalarType::Byte:
      return DataType::kUint8;
    case c10::ScalarType::Int:
      return DataType::kInt32;
    case c10::ScalarType::Long:
      return DataType::kInt64;
    default:
      return std::nullopt;
  }
}

Elements Reducible(const at::Tensor& tensor, const char* collective) {
  const std::optional<DataType> type = ToWeftType(tensor.scalar_type());
  TORCH_CHECK(type.has_value(), "weft: ", collective, " cannot reduce dtype ", tensor.scalar_type(),
              "; Weft reduces float32, float64, float16, bfloat16, int8, uint8, int32 and int64");
  return {*type, static_cast<size_t>(tensor.numel())};
}

Elements Movable(const at::Tensor& tensor) {
  if (const std::optional<DataType> type = ToWeftType(tensor.scalar_type())) {
    return {*type, static_cast<size_t>(tensor.numel())};
  }
  return {DataType::kUint8, static_cast<size_t>(tensor.numel()) * tensor.element_size()};
}

size_t CountOf(const at::Tensor& like, int64_t elements) {
  const size_t count = static_cast<size_t>(elements);
  return ToWeftType(like.scalar_type()) ? count : count * like.element_size();
}

ReduceOp ToWeftOp(const c10d::ReduceOp& op, const char* collective) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::kProd;
    case c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    case c10d::ReduceOp::AVG:
      return ReduceOp::kAvg;
    default: {
      constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                        "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
      const unsigned index = static_cast<unsigned>(op.op_);
      TORCH_CHECK(false, "weft: ", collective, " does not support ReduceOp.",
                  index < std::size(kNames) ? kNames[index] : "UNUSED",
                  "; Weft reduces with SUM, PRODUCT, MIN, MAX and AVG");
    }
  }
}

void CheckCpu(const at::Tensor& tensor, const char* collective) {
  TORCH_CHECK(tensor.device().is_cpu(), "weft: ", collective, " takes CPU tensors, got one on ",
              tensor.device());
  TORCH_CHECK(tensor.layout() == c10::kStrided, "weft: ", collective,
              " takes dense (strided) tensors, got layout ", tensor.layout());
}

void CheckBlocks(const at::Tensor& blocks, const at::Tensor& block, int size,
                 const char* collective) {
  CheckCpu(blocks, collective);
  CheckCpu(block, collective);
  TORCH_CHECK(blocks.scalar_type() == block.scalar_type(), "weft: ", collective, ": dtypes ",
              blocks.scalar_type(), " and ", block.scalar_type(), " differ");
  TORCH_CHECK(blocks.numel() == block.numel() * size, "weft: ", collective, ": a tensor of ",
              blocks.numel(), " elements for ", size, " blocks of ", block.numel(), " (expected ",
              block.numel() * size, ")");
}

const at::Tensor& Single(const std::vector<at::Tensor>& tensors, const char* collective) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", collective, " takes one tensor per rank, got ",
              tensors.size());
  CheckCpu(tensors[0], collective);
  return tensors[0];
}

}  // namespace weft::torch_backend
