#include "weft/kernels/precision.h"

#include <algorithm>
#include <cstring>

#include "weft/kernels/convert.h"

namespace weft {
namespace {

// Rounds through a stack tile so that the array is read and written once per pass and the tile
// stays in L1.
constexpr size_t kTile = 2048;

}  // namespace

void Narrow(Precision precision, const float* src, uint16_t* dst, size_t count) {
  if (precision == Precision::kBFloat16) {
    FloatToBFloat16(src, dst, count);
  } else {
    FloatToHalf(src, dst, count);
  }
}

void Widen(Precision precision, const uint16_t* src, float* dst, size_t count) {
  if (precision == Precision::kBFloat16) {
    BFloat16ToFloat(src, dst, count);
  } else {
    HalfToFloat(src, dst, count);
  }
}

void RoundTo(Precision precision, float* data, size_t count) {
  if (precision == Precision::kFloat32) return;
  uint16_t tile[kTile];
  for (size_t i = 0; i < count; i += kTile) {
    const size_t n = std::min(kTile, count - i);
    Narrow(precision, data + i, tile, n);
    Widen(precision, tile, data + i, n);
  }
}

bool AllFinite(const float* data, size_t count) {
  // An OR over the exponent test of every element: no early exit, so the loop vectorizes.
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t any = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof(bits));
    any |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return any == 0;
}

void Scale(float* data, size_t count, float factor) {
  for (size_t i = 0; i < count; ++i) data[i] *= factor;
}

}  // namespace weft
