// A fused AdamW update: one pass over parameters, gradients and both moments.
//
// Each call dispatches once on ActiveSimdLevel() (see reduce.h) and runs an AVX-512, AVX2 or
// portable loop. Every level evaluates, per element and in this order, exactly the fp32
// operations of the trainer's AdamW loop (trainer/optimizer.cc), with no fused multiply-add:
//
//   m = b1 * m + (1 - b1) * g
//   v = b2 * v + (1 - b2) * g * g               ((1 - b2) * g first, then * g)
//   p = p - (lr * (m * c1) / (sqrt(v * c2) + eps) + decay * p)
//
// where (1 - b1) and (1 - b2) are rounded to fp32 once. Results are therefore bit-identical on
// every level, and to that loop, for any length and alignment: a caller can switch to these
// functions without changing one bit of a training run. The one exception is the payload of a
// NaN result (a NaN gradient, parameter or moment): it is a NaN on every level, but when two NaNs
// meet, which one's payload survives is not specified. `decay * p` is evaluated even when decay
// is 0, as the trainer does, so an infinite parameter becomes NaN there as well.
//
// The arrays must not overlap one another (an element's inputs are read before its outputs are
// written, but blocks are processed several elements at a time). Pointers need only the alignment
// of their element type. n == 0 does nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

// The per-step constants of an AdamW update, all in fp32 as the update uses them.
struct AdamWStep {
  float beta1 = 0;
  float beta2 = 0;
  float eps = 0;
  float correction1 = 0;  // 1 / (1 - beta1^step), the bias correction of the first moment
  float correction2 = 0;  // 1 / (1 - beta2^step), the bias correction of the second moment
  float lr = 0;
  float decay = 0;  // lr * weight_decay, the decoupled weight decay factor; 0 for no decay
};

// The constants of step `step` (counting from 1), derived exactly as the trainer derives them:
// betas, eps and lr rounded to fp32; correction_k = float(1 / (1 - pow(beta_k, step))) computed in
// double; decay = float(lr * weight_decay), or exactly +0 when weight_decay is 0 (the trainer's
// value for tensors that take no decay). step must be >= 1 (step 0 divides by zero, as it would
// in the trainer).
AdamWStep MakeAdamWStep(double beta1, double beta2, double eps, double lr, double weight_decay,
                        int64_t step);

// One AdamW update of n elements in place: m and v (the first and second moments) take gradient
// `grad`, then `param` moves by the bias-corrected step and its decoupled weight decay (see the
// top of this file for the exact operations).
void AdamW(const AdamWStep& s, float* param, const float* grad, float* m, float* v, size_t n);

// The same update, which also writes each updated fp32 parameter rounded to bfloat16 into
// param_bf16 (nearest, ties to even; NaNs quieted: exactly FloatToBFloat16 of convert.h). This is
// the fused update-and-cast of a mixed-precision or offloaded step: the narrow copy costs two
// bytes per element of extra writes and no second pass over the parameters.
void AdamWWithBFloat16Copy(const AdamWStep& s, float* param, const float* grad, float* m, float* v,
                           uint16_t* param_bf16, size_t n);

}  // namespace weft
