// ParamLayout: named views into one flat float buffer.
//
// Parameters, their gradients and the optimizer's moments are each a single contiguous buffer
// with the same layout, so a whole-model operation (all-reduce, AdamW, a checkpoint) is one loop
// over one array, while each tensor stays addressable by name and shape. Later parallel modes cut
// the same layout: tensor parallelism slices a view, ZeRO shards the flat range.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace weft::trainer {

struct TensorView {
  std::string name;           // e.g. "h.0.attn.qkv.w"
  std::vector<int> shape;     // row-major
  size_t offset = 0;          // in floats, from the start of the flat buffer
  size_t size = 0;            // product of shape
  bool weight_decay = false;  // AdamW decays matrices and embeddings, not biases or norms
};

class ParamLayout {
 public:
  // Appends a tensor after the previous one and returns its index (registration order).
  int Add(std::string name, std::vector<int> shape, bool weight_decay);

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView& tensor(int index) const { return tensors_[index]; }
  size_t total() const { return total_; }
  // The index of the named tensor, or -1.
  int Find(const std::string& name) const;

 private:
  std::vector<TensorView> tensors_;
  size_t total_ = 0;
};

}  // namespace weft::trainer
