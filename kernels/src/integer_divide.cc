#include "integer_divide.h"

#include <cstdint>
#include <type_traits>

namespace weft::kernels_internal {
namespace {

// Unsigned 64-bit division by an invariant d in [1, 2^31], by the round-up method of Granlund
// and Montgomery (figure 4.1): q = (t + ((x - t) >> s1)) >> s2 with t = mulhi(m, x).
class UnsignedDivider {
 public:
  explicit UnsignedDivider(uint64_t d) {
    int log2_ceil = 0;
    while ((uint64_t{1} << log2_ceil) < d) ++log2_ceil;
    const unsigned __int128 numerator =
        static_cast<unsigned __int128>((uint64_t{1} << log2_ceil) - d) << 64;
    magic_ = static_cast<uint64_t>(numerator / d) + 1;
    shift1_ = log2_ceil < 1 ? log2_ceil : 1;
    shift2_ = log2_ceil > 1 ? log2_ceil - 1 : 0;
  }

  uint64_t Divide(uint64_t x) const {
    const uint64_t t = static_cast<uint64_t>((static_cast<unsigned __int128>(magic_) * x) >> 64);
    return (t + ((x - t) >> shift1_)) >> shift2_;
  }

 private:
  uint64_t magic_;
  int shift1_;
  int shift2_;
};

template <typename T>
void DivideLoop(void* data, size_t count, int divisor) {
  using U = std::make_unsigned_t<T>;
  // Negations go through uint64_t so that INT_MIN and friends wrap instead of overflowing.
  const bool negative_divisor = divisor < 0;
  const uint64_t magnitude =
      negative_divisor ? uint64_t{0} - static_cast<uint64_t>(static_cast<int64_t>(divisor))
                       : static_cast<uint64_t>(divisor);
  const UnsignedDivider divider(magnitude);
  auto* d = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) {
    bool negate = negative_divisor;
    uint64_t x = static_cast<U>(d[i]);
    if constexpr (std::is_signed_v<T>) {
      if (d[i] < 0) {
        negate = !negate;
        x = uint64_t{0} - static_cast<uint64_t>(static_cast<int64_t>(d[i]));
      }
    }
    const uint64_t q = divider.Divide(x);
    d[i] = static_cast<T>(static_cast<U>(negate ? uint64_t{0} - q : q));
  }
}

}  // namespace

void DivideInt8(void* data, size_t count, int divisor) { DivideLoop<int8_t>(data, count, divisor); }
void DivideUint8(void* data, size_t count, int divisor) {
  DivideLoop<uint8_t>(data, count, divisor);
}
void DivideInt32(void* data, size_t count, int divisor) {
  DivideLoop<int32_t>(data, count, divisor);
}
void DivideUint32(void* data, size_t count, int divisor) {
  DivideLoop<uint32_t>(data, count, divisor);
}
void DivideInt64(void* data, size_t count, int divisor) {
  DivideLoop<int64_t>(data, count, divisor);
}
void DivideUint64(void* data, size_t count, int divisor) {
  DivideLoop<uint64_t>(data, count, divisor);
}

}  // namespace weft::kernels_internal
