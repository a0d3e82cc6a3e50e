#include "param_layout.h"

#include <algorithm>
#include <utility>

namespace weft::trainer {

int ParamLayout::Add(std::string name, std::vector<int> shape, bool weight_decay) {
  TensorView view;
  view.name = std::move(name);
  view.size = 1;
  for (int d : shape) view.size *= static_cast<size_t>(d);
  view.shape = std::move(shape);
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

std::vector<float> ParamLayout::Pack(const float* flat) const {
  std::vector<float> packed;
  packed.reserve(parameters_);
  for (const TensorView& t : tensors_)
    packed.insert(packed.end(), flat + t.offset, flat + t.offset + t.size);
  return packed;
}

void ParamLayout::Unpack(const float* packed, float* flat) const {
  for (const TensorView& t : tensors_) {
    std::copy(packed, packed + t.size, flat + t.offset);
    packed += t.size;
  }
}

}  // namespace weft::trainer
