#include "param_layout.h"

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
  total_ += view.size;
  tensors_.push_back(std::move(view));
  return static_cast<int>(tensors_.size()) - 1;
}

int ParamLayout::Find(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace weft::trainer
