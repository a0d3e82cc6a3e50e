#include "weft/kernels/adam.h"

#include <cmath>

#include "adam_kernels.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

const kernels_internal::AdamWLoops& ActiveAdamW() {
  switch (ActiveSimdLevel()) {
    case SimdLevel::kAvx512:
      return kernels_internal::kAvx512AdamW;
    case SimdLevel::kAvx2:
      return kernels_internal::kAvx2AdamW;
    case SimdLevel::kScalar:
      break;
  }
  return kernels_internal::kScalarAdamW;
}

}  // namespace

AdamWStep MakeAdamWStep(double beta1, double beta2, double eps, double lr, double weight_decay,
                        int64_t step) {
  // The same expressions, in the same types, as AdamW::Step in trainer/optimizer.cc.
  AdamWStep s;
  s.beta1 = static_cast<float>(beta1);
  s.beta2 = static_cast<float>(beta2);
  s.eps = static_cast<float>(eps);
  s.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(beta1, step)));
  s.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(beta2, step)));
  s.lr = static_cast<float>(lr);
  s.decay = weight_decay != 0 ? static_cast<float>(lr * weight_decay) : 0.0f;
  return s;
}

void AdamW(const AdamWStep& s, float* param, const float* grad, float* m, float* v, size_t n) {
  if (n != 0) ActiveAdamW().plain(s, param, grad, m, v, nullptr, n);
}

void AdamWWithBFloat16Copy(const AdamWStep& s, float* param, const float* grad, float* m, float* v,
                           uint16_t* param_bf16, size_t n) {
  if (n != 0) ActiveAdamW().with_bfloat16_copy(s, param, grad, m, v, param_bf16, n);
}

}  // namespace weft
