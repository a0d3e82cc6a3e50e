// Mixed precision's element-wise steps over fp32 arrays: rounding values to what a 16-bit format
// can hold, checking for overflow, and scaling.
//
// A mixed-precision model computes in fp32 (GEMMs accumulate in fp32) but stores what it keeps in
// bf16 or fp16: rounding an fp32 array in place to the 16-bit format's values makes the later
// fp32 arithmetic see exactly what 16-bit storage would hold, and makes packing it into 16 bits
// (FloatToBFloat16 / FloatToHalf of convert.h) lossless. The rounding uses convert.h's SIMD casts,
// so it is round-to-nearest-even, keeps NaNs, infinities and signed zeros, and turns fp16
// overflow (beyond ±65504 after rounding) into ±infinity, as an fp16 store does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

// The formats a mixed-precision run stores in.
enum class Precision : uint8_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// data[i] = the value of data[i] in `precision` (nothing for kFloat32).
void RoundTo(Precision precision, float* data, size_t count);

// Packs count values that RoundTo(precision) left exact into 16 bits, and back (kFloat16 or
// kBFloat16 only).
void Narrow(Precision precision, const float* src, uint16_t* dst, size_t count);
void Widen(Precision precision, const uint16_t* src, float* dst, size_t count);

// True when no data[i] is an infinity or a NaN: the overflow check of dynamic loss scaling.
bool AllFinite(const float* data, size_t count);

// data[i] *= factor: the fused unscale-and-clip of a loss-scaled gradient (factor = clip / scale),
// one rounding per element.
void Scale(float* data, size_t count, float factor);

}  // namespace weft
