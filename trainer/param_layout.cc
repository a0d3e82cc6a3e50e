#include "param_layout.h"

#include <algorithm>
#include <utility>

namespace weft::trainer {

int ParamLayout::Add(std::string name, std::vector<int> shape, bool weight_decay) {
  size_t size = 1;
  for (int d : shape) size *= static_cast<size_t>(d);
  std::vector<int> global_shape = shape;
  const int t = AddPart(std::move(name), std::move(global_shape), std::move(shape), {{0, 0, size}},
                        weight_decay);
  tensors_[t].replicated = true;
  return t;
}

int ParamLayout::AddPart(std::string name, std::vector<int> global_shape, std::vector<int> shape,
                         std::vector<TensorRun> runs, bool weight_decay) {
  TensorView view;
  view.name = std::move(name);
  view.size = 1;
  for (int d : shape) view.size *= static_cast<size_t>(d);
  view.shape = std::move(shape);
  view.global_shape = std::move(global_shape);
  view.replicated = false;
  view.runs = std::move(runs);
  view.offset = total_;
  view.weight_decay = weight_decay;
  view.unit = static_cast<int>(units_.size());
  total_ += view.size;
  parameters_ += view.size;
  tensors_.push_back(std::move(view));
  return static_cast<int>(tensors_.size()) - 1;
}

void ParamLayout::EndUnit(std::string name) {
  UnitView unit;
  unit.name = std::move(name);
  unit.offset = units_.empty() ? 0 : units_.back().offset + units_.back().size;
  unit.first_tensor = units_.empty() ? 0 : units_.back().end_tensor;
  unit.end_tensor = static_cast<int>(tensors_.size());
  total_ = (total_ + pad_quantum_ - 1) / pad_quantum_ * pad_quantum_;
  unit.size = total_ - unit.offset;
  units_.push_back(std::move(unit));
}

int ParamLayout::Find(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<TensorRun> ParamLayout::GlobalRuns(int tensor, size_t first, size_t count) const {
  std::vector<TensorRun> pieces;
  const size_t last = first + count;
  for (const TensorRun& run : tensors_[tensor].runs) {
    const size_t begin = std::max(first, run.local), end = std::min(last, run.local + run.count);
    if (begin < end) pieces.push_back({run.global + (begin - run.local), begin, end - begin});
  }
  return pieces;
}

}  // namespace weft::trainer
