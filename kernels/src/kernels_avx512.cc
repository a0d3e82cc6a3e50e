// The AVX-512 kernels (512-bit registers; needs AVX512F, BW and VL). Partial blocks (the head
// before dst is aligned, and the tail) use masked loads and stores, so they run the same
// instructions as whole ones.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mf16c; see kernel_table.h for why everything here
// except the table has internal linkage.

// GCC 12's AVX-512 intrinsics initialise their "undefined" placeholder registers from
// themselves, which -Wmaybe-uninitialized reports at every use (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel_table.h"
#include "simd_loops.h"

namespace weft::kernels_internal {
namespace {

using simd::MapLoop;

__mmask8 Mask8(size_t n) { return static_cast<__mmask8>((1u << n) - 1); }
__mmask16 Mask16(size_t n) { return static_cast<__mmask16>((1u << n) - 1); }
__mmask64 Mask64(size_t n) { return static_cast<__mmask64>((uint64_t{1} << n) - 1); }

// Lane-wise 8-bit multiply (no such instruction): the low byte of a 16-bit product depends only
// on the low bytes of its factors, so even bytes come from one vpmullw and odd bytes from another.
__m512i MulLo8(__m512i a, __m512i b) {
  const __m512i even = _mm512_mullo_epi16(a, b);
  const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
  return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, even, _mm512_slli_epi16(odd, 8));
}

// Lane-wise 64-bit multiply modulo 2^64 from 32x32->64 products (vpmullq would need AVX512DQ).
__m512i MulLo64(__m512i a, __m512i b) {
  const __m512i low = _mm512_mul_epu32(a, b);
  const __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), b),
                                         _mm512_mul_epu32(a, _mm512_srli_epi64(b, 32)));
  return _mm512_add_epi64(low, _mm512_slli_epi64(cross, 32));
}

// Loads, stores and tails for integer lanes of type T; tails use masks of T's width.
template <typename T>
struct IntegerLanes {
  using Storage = T;
  using Reg = __m512i;
  static constexpr size_t kLanes = 64 / sizeof(T);
  static Reg Load(const T* p) { return _mm512_loadu_si512(p); }
  static void Store(T* p, Reg r) { _mm512_storeu_si512(p, r); }
  static void StoreStream(T* p, Reg r) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), r); }
  static Reg LoadPartial(const T* p, size_t n) {
    if constexpr (sizeof(T) == 1) {
      return _mm512_maskz_loadu_epi8(Mask64(n), p);
    } else if constexpr (sizeof(T) == 4) {
      return _mm512_maskz_loadu_epi32(Mask16(n), p);
    } else {
      return _mm512_maskz_loadu_epi64(Mask8(n), p);
    }
  }
  static void StorePartial(T* p, Reg r, size_t n) {
    if constexpr (sizeof(T) == 1) {
      _mm512_mask_storeu_epi8(p, Mask64(n), r);
    } else if constexpr (sizeof(T) == 4) {
      _mm512_mask_storeu_epi32(p, Mask16(n), r);
    } else {
      _mm512_mask_storeu_epi64(p, Mask8(n), r);
    }
  }
};

template <typename T>
struct Int8Lanes : IntegerLanes<T> {
  using Reg = __m512i;
  static Reg Sum(Reg a, Reg b) { return _mm512_add_epi8(a, b); }
  static Reg Prod(Reg a, Reg b) { return MulLo8(a, b); }
  static Reg Min(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_min_epi8(a, b) : _mm512_min_epu8(a, b);
  }
  static Reg Max(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
  }
};

template <typename T>
struct Int32Lanes : IntegerLanes<T> {
  using Reg = __m512i;
  static Reg Sum(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm512_mullo_epi32(a, b); }
  static Reg Min(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_min_epi32(a, b) : _mm512_min_epu32(a, b);
  }
  static Reg Max(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_max_epi32(a, b) : _mm512_max_epu32(a, b);
  }
};

template <typename T>
struct Int64Lanes : IntegerLanes<T> {
  using Reg = __m512i;
  static Reg Sum(Reg a, Reg b) { return _mm512_add_epi64(a, b); }
  static Reg Prod(Reg a, Reg b) { return MulLo64(a, b); }
  static Reg Min(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_min_epi64(a, b) : _mm512_min_epu64(a, b);
  }
  static Reg Max(Reg a, Reg b) {
    return std::is_signed_v<T> ? _mm512_max_epi64(a, b) : _mm512_max_epu64(a, b);
  }
};

// vminps/vmaxps are exactly `a < b ? a : b` / `a > b ? a : b`, NaN and signed-zero cases included.
struct Float32Lanes {
  using Storage = float;
  using Reg = __m512;
  static constexpr size_t kLanes = 16;
  static Reg Load(const Storage* p) { return _mm512_loadu_ps(p); }
  static void Store(Storage* p, Reg r) { _mm512_storeu_ps(p, r); }
  static void StoreStream(Storage* p, Reg r) { _mm512_stream_ps(p, r); }
  static Reg LoadPartial(const Storage* p, size_t n) { return _mm512_maskz_loadu_ps(Mask16(n), p); }
  static void StorePartial(Storage* p, Reg r, size_t n) { _mm512_mask_storeu_ps(p, Mask16(n), r); }
  static Reg Sum(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg Splat(int divisor) { return _mm512_set1_ps(static_cast<float>(divisor)); }
  static Reg Div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
};

struct Float64Lanes {
  using Storage = double;
  using Reg = __m512d;
  static constexpr size_t kLanes = 8;
  static Reg Load(const Storage* p) { return _mm512_loadu_pd(p); }
  static void Store(Storage* p, Reg r) { _mm512_storeu_pd(p, r); }
  static void StoreStream(Storage* p, Reg r) { _mm512_stream_pd(p, r); }
  static Reg LoadPartial(const Storage* p, size_t n) { return _mm512_maskz_loadu_pd(Mask8(n), p); }
  static void StorePartial(Storage* p, Reg r, size_t n) { _mm512_mask_storeu_pd(p, Mask8(n), r); }
  static Reg Sum(Reg a, Reg b) { return _mm512_add_pd(a, b); }
  static Reg Prod(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
  static Reg Min(Reg a, Reg b) { return _mm512_min_pd(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm512_max_pd(a, b); }
  static Reg Splat(int divisor) { return _mm512_set1_pd(static_cast<double>(divisor)); }
  static Reg Div(Reg a, Reg b) { return _mm512_div_pd(a, b); }
};

// fp16 computes in fp32 registers: vcvtph2ps on the way in, vcvtps2ph (nearest-even) on the way
// out.
__m512 WidenHalf(__m256i h) { return _mm512_cvtph_ps(h); }
__m256i NarrowToHalf(__m512 r) { return _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT); }

struct HalfLanes : Float32Lanes {
  using Storage = uint16_t;
  static Reg Load(const Storage* p) {
    return WidenHalf(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void Store(Storage* p, Reg r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), NarrowToHalf(r));
  }
  static void StoreStream(Storage* p, Reg r) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), NarrowToHalf(r));
  }
  static Reg LoadPartial(const Storage* p, size_t n) {
    return WidenHalf(_mm256_maskz_loadu_epi16(Mask16(n), p));
  }
  static void StorePartial(Storage* p, Reg r, size_t n) {
    _mm256_mask_storeu_epi16(p, Mask16(n), NarrowToHalf(r));
  }
};

// bf16 is the top half of an fp32: widen by shifting, narrow by rounding the low half away to
// nearest-even in integer arithmetic (NaNs are quieted instead, as in half_bits.h).
__m256i NarrowToBFloat16(__m512 r) {
  const __m512i bits = _mm512_castps_si512(r);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 is_nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

__m512 WidenBFloat16(__m256i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

struct BFloat16Lanes : Float32Lanes {
  using Storage = uint16_t;
  static Reg Load(const Storage* p) {
    return WidenBFloat16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void Store(Storage* p, Reg r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), NarrowToBFloat16(r));
  }
  static void StoreStream(Storage* p, Reg r) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), NarrowToBFloat16(r));
  }
  static Reg LoadPartial(const Storage* p, size_t n) {
    return WidenBFloat16(_mm256_maskz_loadu_epi16(Mask16(n), p));
  }
  static void StorePartial(Storage* p, Reg r, size_t n) {
    _mm256_mask_storeu_epi16(p, Mask16(n), NarrowToBFloat16(r));
  }
};

// 32-bit integers divide exactly in fp64: a quotient that is not an integer lies at least
// 1/|divisor| from one, far more than fp64's rounding error for operands below 2^32, so
// truncating the rounded quotient gives the true one. The sign of the divisor is applied
// afterwards in integer arithmetic so that it wraps as integer_divide.h specifies.
template <bool kSigned>
void DivideInt32ViaDouble(void* data, size_t count, int divisor) {
  using L = Int32Lanes<std::conditional_t<kSigned, int32_t, uint32_t>>;
  auto* d = static_cast<typename L::Storage*>(data);
  const double magnitude = divisor < 0 ? -static_cast<double>(divisor) : divisor;
  const __m512d by = _mm512_set1_pd(magnitude);
  const bool negate = divisor < 0;
  auto half = [by](__m256i x) {
    if constexpr (kSigned) {
      return _mm512_cvttpd_epi32(_mm512_div_pd(_mm512_cvtepi32_pd(x), by));
    } else {
      return _mm512_cvttpd_epu32(_mm512_div_pd(_mm512_cvtepu32_pd(x), by));
    }
  };
  MapLoop<L, L>(d, d, count, [half, negate](__m512i x) {
    const __m256i low = half(_mm512_castsi512_si256(x));
    const __m256i high = half(_mm512_extracti64x4_epi64(x, 1));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
    return negate ? _mm512_sub_epi32(_mm512_setzero_si512(), q) : q;
  });
}

// This level's lane type per data type, for simd::MakeTable.
struct Lanes {
  using Int8 = Int8Lanes<int8_t>;
  using Uint8 = Int8Lanes<uint8_t>;
  using Int32 = Int32Lanes<int32_t>;
  using Uint32 = Int32Lanes<uint32_t>;
  using Int64 = Int64Lanes<int64_t>;
  using Uint64 = Int64Lanes<uint64_t>;
  using Half = HalfLanes;
  using BFloat16 = BFloat16Lanes;
  using Float32 = Float32Lanes;
  using Float64 = Float64Lanes;
};

}  // namespace

constinit const KernelTable kAvx512Kernels =
    simd::MakeTable<Lanes>(&DivideInt32ViaDouble<true>, &DivideInt32ViaDouble<false>);

}  // namespace weft::kernels_internal
