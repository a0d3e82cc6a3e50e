// ParamLayout: named views into one flat float buffer, grouped into units.
//
// Parameters, their gradients and the optimizer's moments are each a single contiguous buffer
// with the same layout, so a whole-model operation (all-reduce, AdamW, a checkpoint) is one loop
// over one array, while each tensor stays addressable by name and shape. Tensors are grouped into
// units (the embeddings, each block, the final norm): what ZeRO reduces and gathers at once. Each
// unit ends padded to a multiple of `pad_quantum` elements (1: no padding), so that it divides
// into equal, aligned per-rank slices; padding is never read by the model and stays zero.
//
// Under tensor parallelism a rank holds part of some tensors (a slice of rows or columns): its
// view has the local shape, the whole tensor's shape, and the runs that place each local element
// in the whole tensor, so that initialisation and checkpoints address the whole tensor's elements
// whatever the layout.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace weft::trainer {

// Local elements [local, local + count) of a tensor are elements [global, global + count) of the
// whole tensor (row-major in its global shape).
struct TensorRun {
  size_t global = 0;
  size_t local = 0;
  size_t count = 0;
};

struct TensorView {
  std::string name;               // e.g. "h.0.attn.qkv.w"
  std::vector<int> shape;         // this rank's part, row-major
  std::vector<int> global_shape;  // the whole tensor's
  size_t offset = 0;              // in floats, from the start of the flat buffer
  size_t size = 0;                // product of shape
  bool weight_decay = false;      // AdamW decays matrices and embeddings, not biases or norms
  // Every tensor-parallel rank holds the whole tensor (the same values on each).
  bool replicated = true;
  // Under sequence parallelism: each rank's gradient covers its token rows only, and the group's
  // sum is the gradient.
  bool partial_gradient = false;
  // A copy of a tensor another pipeline stage holds (the tied embedding at the head): the two
  // gradients are summed, and the other stage's copy is the one counted and saved.
  bool tied_copy = false;
  std::vector<TensorRun> runs;  // where the local elements lie in the whole tensor, in local order
  int unit = 0;                 // the unit it belongs to
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

  // Appends a whole tensor to the open unit and returns its index (registration order).
  int Add(std::string name, std::vector<int> shape, bool weight_decay);
  // Appends this rank's part of a tensor: `runs` place its elements (the product of `shape`) in
  // the whole tensor of `global_shape`.
  int AddPart(std::string name, std::vector<int> global_shape, std::vector<int> shape,
              std::vector<TensorRun> runs, bool weight_decay);
  // Marks a tensor's gradient as partial across the tensor-parallel group (TensorView).
  void MarkPartialGradient(int tensor) { tensors_[tensor].partial_gradient = true; }
  // Marks a tensor as a tied copy (TensorView).
  void MarkTiedCopy(int tensor) { tensors_[tensor].tied_copy = true; }
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

  // Local elements [first, first + count) of tensor `tensor`, cut where they change runs: each
  // piece's place in the whole tensor (global) and in the local part (local).
  std::vector<TensorRun> GlobalRuns(int tensor, size_t first, size_t count) const;

 private:
  size_t pad_quantum_;
  std::vector<TensorView> tensors_;
  std::vector<UnitView> units_;
  size_t total_ = 0;
  size_t parameters_ = 0;
};

}  // namespace weft::trainer
