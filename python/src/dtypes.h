// How torch's tensors, dtypes and reduce ops map onto Weft's buffers, types and operators.
//
// Reductions need a dtype Weft reduces (float32/64, float16, bfloat16, int8, uint8, int32,
// int64) and an operator it has (SUM, PRODUCT, MIN, MAX, AVG); anything else is an error naming
// what is supported. Operations that only move data accept every dtype: one Weft lacks travels
// as its bytes.
#pragma once

#include <cstddef>
#include <optional>

#include "ATen/ATen.h"
#include "torch/csrc/distributed/c10d/Types.hpp"
#include "weft/kernels/dtype.h"

namespace weft::torch_backend {

// The Weft type of a torch dtype, when Weft has one.
std::optional<DataType> ToWeftType(c10::ScalarType type);

// Elements of a contiguous tensor as Weft counts them.
struct Elements {
  DataType type;
  size_t count;
};
// For reductions: the tensor's own type, or a c10::Error naming the dtype and `collective`.
Elements Reducible(const at::Tensor& tensor, const char* collective);
// For moving data: the tensor's own type, or its bytes as uint8 where Weft lacks the type.
Elements Movable(const at::Tensor& tensor);
// The count of `elements` tensor elements of `like`'s dtype, as Movable or Reducible counts them.
size_t CountOf(const at::Tensor& like, int64_t elements);

ReduceOp ToWeftOp(const c10d::ReduceOp& op, const char* collective);

// A dense CPU tensor, or a c10::Error naming `collective`.
void CheckCpu(const at::Tensor& tensor, const char* collective);
// CPU tensors of one dtype, `blocks` holding `size` times the elements of `block`.
void CheckBlocks(const at::Tensor& blocks, const at::Tensor& block, int size,
                 const char* collective);
// Exactly one tensor (c10d's multi-device lists are CUDA-only), or an error.
const at::Tensor& Single(const std::vector<at::Tensor>& tensors, const char* collective);

}  // namespace weft::torch_backend
