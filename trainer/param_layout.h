// ParamLayout: named views into one flat float buffer, grouped into units.
//
// Parameters, their gradients and the optimizer's moments are each a single contiguous buffer
// with the same layout, so a whole-model operation (all-reduce, AdamW, a checkpoint) is one loop
// over one array, while each tensor stays addressable by name and shape. Tensors are grouped into
// units (the embeddings, each block, the final norm): what ZeRO reduces and gathers at once. Each
// unit ends padded to a multiple of `pad_quantum` elements (1: no padding), so that it divides
// into equal, aligned per-rank slices; padding is never read by the model and stays zero.
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
  int unit = 0;               // the unit it belongs to
};

struct UnitView {
  std::string name;  // "embeddings", "h.0", ..., "lnf"
  size_t offset = 0;
  size_t size = 0;  // padding included
  int first_tensor = 0;
  int end_tensor = 0;  // one past its last tensor
};

class ParamLayout {
 public:
  explicit ParamLayout(size_t pad_quantum = 1) : pad_quantum_(pad_quantum) {}

  // Appends a tensor to the open unit and returns its index (registration order).
  int Add(std::string name, std::vector<int> shape, bool weight_decay);
  // Closes the open unit (the tensors added since the last EndUnit) and pads it.
  void EndUnit(std::string name);

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView& tensor(int index) const { return tensors_[index]; }
  const std::vector<UnitView>& units() const { return units_; }
  // Elements of the flat buffer, padding included.
  size_t total() const { return total_; }
  // Parameters: the tensors' elements, without padding.
  size_t parameters() const { return parameters_; }
  // The index of the named tensor, or -1.
  int Find(const std::string& name) const;

  // The tensors of `flat` (total() elements) back to back in registration order, without
  // padding: a form that does not depend on pad_quantum (checkpoints).
  std::vector<float> Pack(const float* flat) const;
  // The inverse: scatters `packed` (parameters() elements) into `flat`; padding is left alone.
  void Unpack(const float* packed, float* flat) const;

 private:
  size_t pad_quantum_;
  std::vector<TensorView> tensors_;
  std::vector<UnitView> units_;
  size_t total_ = 0;
  size_t parameters_ = 0;
};

}  // namespace weft::trainer
