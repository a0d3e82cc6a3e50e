// The portable AdamW loop: the trainer's per-element operations as written, and the definition
// the SIMD levels are tested against. The compiler may vectorise it for baseline x86-64 (SSE2);
// packed and scalar IEEE operations round alike, and -ffp-contract=off rules out fused ones.
#include <cmath>

#include "adam_kernels.h"
#include "half_bits.h"

namespace weft::kernels_internal {
namespace {

template <bool kCopy>
void Loop(const AdamWStep& s, float* p, const float* g, float* m, float* v, uint16_t* bf16,
          size_t n) {
  const float b1 = s.beta1, b2 = s.beta2, one_minus_b1 = 1.0f - s.beta1;
  const float one_minus_b2 = 1.0f - s.beta2;
  for (size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + one_minus_b1 * g[i];
    v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
    const float m_hat = m[i] * s.correction1;
    const float v_hat = v[i] * s.correction2;
    p[i] -= s.lr * m_hat / (std::sqrt(v_hat) + s.eps) + s.decay * p[i];
    if constexpr (kCopy) bf16[i] = FloatToBFloat16Bits(p[i]);
  }
}

}  // namespace

constinit const AdamWLoops kScalarAdamW = {&Loop<false>, &Loop<true>};

}  // namespace weft::kernels_internal
