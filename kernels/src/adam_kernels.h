// The per-SIMD-level AdamW loops that adam.cc dispatches between (see weft/kernels/adam.h for
// the operations every level must evaluate, in order), and the update written once over a
// level's "lane traits" for the SIMD levels to instantiate.
//
// Each level is its own translation unit compiled with that level's target flags, and exports
// only its constant table of loops: no code of a wider level runs before dispatch has checked
// the CPU. The templates below are instantiated with traits types from each unit's anonymous
// namespace, so every instantiation has internal linkage and carries that unit's flags; this
// header must therefore hold no non-template inline function.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/kernels/adam.h"

namespace weft::kernels_internal {

// One AdamW update of n elements in place; the copying loop also writes the updated parameters
// rounded to bfloat16 to param_bf16 (the other ignores it). The arrays are disjoint; n may be 0.
using AdamWFn = void (*)(const AdamWStep& s, float* param, const float* grad, float* m, float* v,
                         uint16_t* param_bf16, size_t n);

struct AdamWLoops {
  AdamWFn plain;
  AdamWFn with_bfloat16_copy;
};

extern const AdamWLoops kScalarAdamW;
extern const AdamWLoops kAvx2AdamW;
extern const AdamWLoops kAvx512AdamW;

namespace adam_simd {

// Lane traits L: the register type L::Reg, L::Set1(float) broadcasting a constant, and
// L::Add, L::Sub, L::Mul, L::Div (Reg, Reg) and L::Sqrt (Reg), each one IEEE fp32 operation per
// lane with the first argument on the left.

// The step's constants, each broadcast to every lane once per call.
template <typename L>
struct Constants {
  explicit Constants(const AdamWStep& s)
      : b1(L::Set1(s.beta1)),
        one_minus_b1(L::Set1(1.0f - s.beta1)),
        b2(L::Set1(s.beta2)),
        one_minus_b2(L::Set1(1.0f - s.beta2)),
        c1(L::Set1(s.correction1)),
        c2(L::Set1(s.correction2)),
        lr(L::Set1(s.lr)),
        eps(L::Set1(s.eps)),
        decay(L::Set1(s.decay)) {}
  typename L::Reg b1, one_minus_b1, b2, one_minus_b2, c1, c2, lr, eps, decay;
};

// The updated parameter; m and v are updated in their registers. The operations and their order
// are those of adam.h. Always inlined: as a call, the constants would live in memory.
template <typename L>
[[gnu::always_inline]] inline typename L::Reg Update(const Constants<L>& k, typename L::Reg p,
                                                     typename L::Reg g, typename L::Reg& m,
                                                     typename L::Reg& v) {
  m = L::Add(L::Mul(k.b1, m), L::Mul(k.one_minus_b1, g));
  v = L::Add(L::Mul(k.b2, v), L::Mul(L::Mul(k.one_minus_b2, g), g));
  const typename L::Reg m_hat = L::Mul(m, k.c1);
  const typename L::Reg v_hat = L::Mul(v, k.c2);
  const typename L::Reg step = L::Div(L::Mul(k.lr, m_hat), L::Add(L::Sqrt(v_hat), k.eps));
  return L::Sub(p, L::Add(step, L::Mul(k.decay, p)));
}

}  // namespace adam_simd
}  // namespace weft::kernels_internal
