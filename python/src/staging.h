// Staging: the contiguous buffers Weft reads and writes in place of the caller's tensors.
//
// Each function returns what Weft uses and records in `staged` what finishing must do: keep a
// copy alive, or copy a result back into the caller's tensor. Tensors that are already
// contiguous are used as they are.
#pragma once

#include <vector>

#include "ATen/ATen.h"
#include "work.h"

namespace weft::torch_backend {

// An input: the tensor, or a contiguous copy.
at::Tensor StageIn(const at::Tensor& tensor, Staged& staged);
// An output: the tensor, or a contiguous buffer copied into it when the work finishes.
at::Tensor StageOut(const at::Tensor& tensor, Staged& staged);
// Both, for in-place collectives: the tensor, or a contiguous copy that is copied back.
at::Tensor StageInOut(const at::Tensor& tensor, Staged& staged);

// One flat buffer holding the tensors one after the other (they share one dtype).
at::Tensor FlattenIn(const std::vector<at::Tensor>& tensors, Staged& staged);
// One flat buffer, as long as the tensors together, whose consecutive pieces are copied into
// the tensors when the work finishes.
at::Tensor FlattenOut(const std::vector<at::Tensor>& tensors, Staged& staged);

}  // namespace weft::torch_backend
