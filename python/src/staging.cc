#include "staging.h"

namespace weft::torch_backend {

// Staging copies are plumbing, never part of an autograd graph.

at::Tensor StageIn(const at::Tensor& tensor, Staged& staged) {
  at::NoGradGuard no_grad;
  at::Tensor in = tensor.contiguous();
  staged.keep_alive.push_back(in);
  return in;
}

at::Tensor StageOut(const at::Tensor& tensor, Staged& staged) {
  if (tensor.is_contiguous()) return tensor;
  at::Tensor out =
      at::empty(tensor.sizes(), tensor.options().memory_format(c10::MemoryFormat::Contiguous));
  staged.copies.emplace_back(tensor, out);
  return out;
}

at::Tensor StageInOut(const at::Tensor& tensor, Staged& staged) {
  at::NoGradGuard no_grad;
  if (tensor.is_contiguous()) return tensor;
  at::Tensor both = tensor.contiguous();
  staged.copies.emplace_back(tensor, both);
  return both;
}

at::Tensor FlattenIn(const std::vector<at::Tensor>& tensors, Staged& staged) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) flat.push_back(tensor.reshape({-1}));
  at::Tensor in = at::cat(flat);
  staged.keep_alive.push_back(in);
  return in;
}

at::Tensor FlattenOut(const std::vector<at::Tensor>& tensors, Staged& staged) {
  int64_t total = 0;
  for (const at::Tensor& tensor : tensors) total += tensor.numel();
  at::Tensor out = at::empty({total}, tensors.at(0).options());
  int64_t offset = 0;
  for (const at::Tensor& tensor : tensors) {
    staged.copies.emplace_back(tensor, out.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
  return out;
}

}  // namespace weft::torch_backend
