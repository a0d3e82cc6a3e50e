#include "weft/kernels/convert.h"

#include "dispatch.h"
#include "half_bits.h"

namespace weft {

using kernels_internal::ActiveKernels;

float HalfToFloat(uint16_t h) { return kernels_internal::HalfBitsToFloat(h); }
uint16_t FloatToHalf(float f) { return kernels_internal::FloatToHalfBits(f); }
float BFloat16ToFloat(uint16_t b) { return kernels_internal::BFloat16BitsToFloat(b); }
uint16_t FloatToBFloat16(float f) { return kernels_internal::FloatToBFloat16Bits(f); }

void HalfToFloat(const uint16_t* src, float* dst, size_t count) {
  if (count != 0) ActiveKernels().half_to_float(src, dst, count);
}
void FloatToHalf(const float* src, uint16_t* dst, size_t count) {
  if (count != 0) ActiveKernels().float_to_half(src, dst, count);
}
void BFloat16ToFloat(const uint16_t* src, float* dst, size_t count) {
  if (count != 0) ActiveKernels().bfloat16_to_float(src, dst, count);
}
void FloatToBFloat16(const float* src, uint16_t* dst, size_t count) {
  if (count != 0) ActiveKernels().float_to_bfloat16(src, dst, count);
}

}  // namespace weft
