// The AVX-512 codec lanes: sixteen fp32 lanes per register, block tails through masked loads and
// stores (AVX-512BW/VL for the byte-granular ones).
//
// Compiled with -mavx512f -mavx512bw -mavx512vl; see codec_kernels.h for why everything here
// except the table has internal linkage.

// GCC 12 reports its own AVX-512 intrinsics' "undefined" placeholders as maybe-uninitialized
// (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "codec_kernels.h"

namespace weft::kernels_internal {
namespace {

struct Avx512Lanes {
  static constexpr size_t kLanes = 16;
  using F = __m512;
  using I = __m512i;
  struct D {
    __m512d low, high;
  };

  static __mmask16 First(size_t c) { return static_cast<__mmask16>((1u << c) - 1); }

  static F Load(const float* p, size_t c) {
    return c == kLanes ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(First(c), p);
  }
  static void Store(float* p, F r, size_t c) {
    if (c == kLanes) return _mm512_storeu_ps(p, r);
    _mm512_mask_storeu_ps(p, First(c), r);
  }
  static F Zero() { return _mm512_setzero_ps(); }
  static F Splat(float f) { return _mm512_set1_ps(f); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Abs(F a) { return _mm512_abs_ps(a); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Finite(F a, size_t* nonfinite) {
    const __mmask16 finite = _mm512_cmp_ps_mask(Abs(a), _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
    *nonfinite += static_cast<size_t>(__builtin_popcount(~finite & 0xFFFFu));
    return _mm512_maskz_mov_ps(finite, a);
  }
  // vcvtps2dq rounds in the MXCSR mode, which is the default nearest-even.
  static I Quantize(F a) {
    const I q = _mm512_cvtps_epi32(a);
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
  }
  static F ToFloat(I a) { return _mm512_cvtepi32_ps(a); }
  static I LoadInt8(const int8_t* p, size_t c) {
    return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(First(c), p));
  }
  static void StoreInt8(int8_t* p, I a, size_t c) {
    _mm_mask_storeu_epi8(p, First(c), _mm512_cvtepi32_epi8(a));
  }
  static uint32_t SignMask(F a) { return _mm512_cmp_ps_mask(a, Zero(), _CMP_GE_OQ); }
  static F SignSelect(uint32_t mask, F s) {
    const F negated =
        _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN)));
    return _mm512_mask_blend_ps(static_cast<__mmask16>(mask), negated, s);
  }
  static D ZeroD() { return D{_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static D AddWidened(D d, F a) {
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    return D{_mm512_add_pd(d.low, _mm512_cvtps_pd(_mm512_castps512_ps256(a))),
             _mm512_add_pd(d.high, _mm512_cvtps_pd(high))};
  }
  static void StoreD(double* p, D d) {
    _mm512_storeu_pd(p, d.low);
    _mm512_storeu_pd(p + 8, d.high);
  }
};

}  // namespace

constinit const CodecKernels kAvx512CodecKernels = MakeCodecKernels<Avx512Lanes>();

}  // namespace weft::kernels_internal
