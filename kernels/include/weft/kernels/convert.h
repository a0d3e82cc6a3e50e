// Conversions between fp32 and the 16-bit floating-point formats, scalar and bulk.
//
// Rounding is to nearest, ties to even; NaNs stay NaN (quiet), infinities and signed zeros are
// preserved, fp16 subnormals are handled exactly. The bulk forms use F16C / AVX-512 where present.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

void HalfToFloat(const uint16_t* src, float* dst, size_t count);
void FloatToHalf(const float* src, uint16_t* dst, size_t count);
void BFloat16ToFloat(const uint16_t* src, float* dst, size_t count);
void FloatToBFloat16(const float* src, uint16_t* dst, size_t count);

}  // namespace weft
