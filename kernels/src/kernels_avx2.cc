// The AVX2 kernels (256-bit registers; needs AVX2 and F16C). Partial blocks (the head before dst
// is aligned, and the tail) go through a one-register stack buffer, so they run the same
// instructions as whole ones.
//
// Compiled with -mavx2 -mf16c; see kernel_table.h for why everything here except the table has
// internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_table.h"
#include "simd_loops.h"

namespace weft::kernels_internal {
namespace {

using simd::MapLoop;

// Adds tails to a "core" lane type (Load, Store and the operators) by staging the first n
// elements in a zeroed buffer; AVX2 has no byte- or word-granular masked loads and stores.
template <typename Core>
struct Buffered : Core {
  using S = typename Core::Storage;
  static typename Core::Reg LoadPartial(const S* p, size_t n) {
    S buffer[Core::kLanes] = {};
    std::memcpy(buffer, p, n * sizeof(S));
    return Core::Load(buffer);
  }
  static void StorePartial(S* p, typename Core::Reg r, size_t n) {
    S buffer[Core::kLanes];
    Core::Store(buffer, r);
    std::memcpy(p, buffer, n * sizeof(S));
  }
};

template <typename T>
struct IntegerCore {
  using Storage = T;
  using Reg = __m256i;
  static constexpr size_t kLanes = 32 / sizeof(T);
  static Reg Load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void Store(T* p, Reg r) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), r); }
  static void StoreStream(T* p, Reg r) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), r); }
};

// Lane-wise 8-bit multiply (no such instruction): the low byte of a 16-bit product depends only
// on the low bytes of its factors, so even bytes come from one vpmullw and odd bytes from another.
__m256i MulLo8(__m256i a, __m256i b) {
  const __m256i even = _mm256_mullo_epi16(a, b);
  const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)),
                         _mm256_slli_epi16(odd, 8));
}

// Lane-wise 64-bit multiply modulo 2^64 from 32x32->64 products.
__m256i MulLo64(__m256i a, __m256i b) {
  const __m256i low = _mm256_mul_epu32(a, b);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                         _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

// a > b for 64-bit lanes; unsigned lanes compare with their sign bits flipped.
template <bool kSigned>
__m256i Greater64(__m256i a, __m256i b) {
  if constexpr (kSigned) {
    return _mm256_cmpgt_epi64(a, b);
  } else {
    const __m256i flip = _mm256_set1_epi64x(INT64_MIN);
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
  }
}

template <typename T>
struct Int8Core : IntegerCore<T> {
  using Reg = __m256i;
  static Reg Sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  static Reg Prod(Reg a, Reg b) { return MulLo8(a, b); }
  static Reg Min(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm256_min_epi8(a, b) : _mm256_min_epu8(a, b);
  }
  static Reg Max(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
  }
};

template <typename T>
struct Int32Core : IntegerCore<T> {
  using Reg = __m256i;
  static Reg Sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  static Reg Min(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm256_min_epi32(a, b) : _mm256_min_epu32(a, b);
  }
  static Reg Max(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm256_max_epi32(a, b) : _mm256_max_epu32(a, b);
  }
};

template <typename T>
struct Int64Core : IntegerCore<T> {
  using Reg = __m256i;
  static Reg Sum(Reg a, Reg b) { return _mm256_add_epi64(a, b); }
  static Reg Prod(Reg a, Reg b) { return MulLo64(a, b); }
  // Equal lanes may take either operand; the result is the same value.
  static Reg Min(Reg a, Reg b) {
    return _mm256_blendv_epi8(a, b, Greater64<std::is_signed_v<T>>(a, b));
  }
  static Reg Max(Reg a, Reg b) {
    return _mm256_blendv_epi8(a, b, Greater64<std::is_signed_v<T>>(b, a));
  }
};

// vminps/vmaxps are exactly `a < b ? a : b` / `a > b ? a : b`, NaN and signed-zero cases included.
struct Float32Core {
  using Storage = float;
  using Reg = __m256;
  static constexpr size_t kLanes = 8;
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg r) { _mm256_storeu_ps(p, r); }
  static void StoreStream(float* p, Reg r) { _mm256_stream_ps(p, r); }
  static Reg Sum(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg Splat(int divisor) { return _mm256_set1_ps(static_cast<float>(divisor)); }
  static Reg Div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
};

struct Float64Core {
  using Storage = double;
  using Reg = __m256d;
  static constexpr size_t kLanes = 4;
  static Reg Load(const double* p) { return _mm256_loadu_pd(p); }
  static void Store(double* p, Reg r) { _mm256_storeu_pd(p, r); }
  static void StoreStream(double* p, Reg r) { _mm256_stream_pd(p, r); }
  static Reg Sum(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  static Reg Min(Reg a, Reg b) { return _mm256_min_pd(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm256_max_pd(a, b); }
  static Reg Splat(int divisor) { return _mm256_set1_pd(static_cast<double>(divisor)); }
  static Reg Div(Reg a, Reg b) { return _mm256_div_pd(a, b); }
};

// fp16 computes in fp32 registers: vcvtph2ps on the way in, vcvtps2ph (nearest-even) on the way
// out.
struct HalfCore : Float32Core {
  using Storage = uint16_t;
  static Reg Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void Store(uint16_t* p, Reg r) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Narrow(r));
  }
  static void StoreStream(uint16_t* p, Reg r) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), Narrow(r));
  }
  static __m128i Narrow(Reg r) { return _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT); }
};

// bf16 is the top half of an fp32: widen by shifting, narrow by rounding the low half away to
// nearest-even in integer arithmetic (NaNs are quieted instead, as in half_bits.h).
struct BFloat16Core : Float32Core {
  using Storage = uint16_t;
  static Reg Load(const uint16_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
  }
  static void Store(uint16_t* p, Reg r) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Narrow(r));
  }
  static void StoreStream(uint16_t* p, Reg r) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), Narrow(r));
  }
  static __m128i Narrow(Reg r) {
    const __m256i bits = _mm256_castps_si256(r);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i quiet_nan =
        _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    const __m256i narrowed = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    // Every lane now holds a value below 2^16, so the saturating pack is a plain narrowing.
    return _mm_packus_epi32(_mm256_castsi256_si128(narrowed),
                            _mm256_extracti128_si256(narrowed, 1));
  }
};

// This level's lane type per data type, for simd::MakeTable.
struct Lanes {
  using Int8 = Buffered<Int8Core<int8_t>>;
  using Uint8 = Buffered<Int8Core<uint8_t>>;
  using Int32 = Buffered<Int32Core<int32_t>>;
  using Uint32 = Buffered<Int32Core<uint32_t>>;
  using Int64 = Buffered<Int64Core<int64_t>>;
  using Uint64 = Buffered<Int64Core<uint64_t>>;
  using Half = Buffered<HalfCore>;
  using BFloat16 = Buffered<BFloat16Core>;
  using Float32 = Buffered<Float32Core>;
  using Float64 = Buffered<Float64Core>;
};

// 32-bit integers divide exactly in fp64: a quotient that is not an integer lies at least
// 1/|divisor| from one, far more than fp64's rounding error for operands below 2^32, so
// truncating the rounded quotient gives the true one. The sign of the divisor is applied
// afterwards in integer arithmetic so that it wraps as integer_divide.h specifies. Unsigned
// values travel through the signed conversions offset by 2^31, which fp64 represents exactly.
template <bool kSigned>
void DivideInt32ViaDouble(void* data, size_t count, int divisor) {
  using L = std::conditional_t<kSigned, Lanes::Int32, Lanes::Uint32>;
  auto* d = static_cast<typename L::Storage*>(data);
  const double magnitude = divisor < 0 ? -static_cast<double>(divisor) : divisor;
  const __m256d by = _mm256_set1_pd(magnitude);
  const bool negate = divisor < 0;
  auto half = [by](__m128i x) {
    if constexpr (kSigned) {
      return _mm256_cvttpd_epi32(_mm256_div_pd(_mm256_cvtepi32_pd(x), by));
    } else {
      const __m128i sign = _mm_set1_epi32(INT32_MIN);
      const __m256d offset = _mm256_set1_pd(2147483648.0);
      const __m256d value = _mm256_add_pd(_mm256_cvtepi32_pd(_mm_xor_si128(x, sign)), offset);
      const __m256d quotient =
          _mm256_round_pd(_mm256_div_pd(value, by), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      return _mm_xor_si128(_mm256_cvttpd_epi32(_mm256_sub_pd(quotient, offset)), sign);
    }
  };
  MapLoop<L, L>(d, d, count, [half, negate](__m256i x) {
    const __m256i q =
        _mm256_set_m128i(half(_mm256_extracti128_si256(x, 1)), half(_mm256_castsi256_si128(x)));
    return negate ? _mm256_sub_epi32(_mm256_setzero_si256(), q) : q;
  });
}

}  // namespace

constinit const KernelTable kAvx2Kernels =
    simd::MakeTable<Lanes>(&DivideInt32ViaDouble<true>, &DivideInt32ViaDouble<false>);

}  // namespace weft::kernels_internal
