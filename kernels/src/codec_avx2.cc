// The AVX2 codec lanes: eight fp32 lanes per register. Partial registers (block tails) go through
// a stack buffer, since AVX2 has no byte-granular masked loads and stores.
//
// Compiled with -mavx2 -mf16c; see codec_kernels.h for why everything here except the table has
// internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec_kernels.h"

namespace weft::kernels_internal {
namespace {

struct Avx2Lanes {
  static constexpr size_t kLanes = 8;
  using F = __m256;
  using I = __m256i;
  struct D {
    __m256d low, high;
  };

  static F Load(const float* p, size_t c) {
    if (c == kLanes) return _mm256_loadu_ps(p);
    float buffer[kLanes] = {};
    std::memcpy(buffer, p, c * sizeof(float));
    return _mm256_loadu_ps(buffer);
  }
  static void Store(float* p, F r, size_t c) {
    if (c == kLanes) return _mm256_storeu_ps(p, r);
    float buffer[kLanes];
    _mm256_storeu_ps(buffer, r);
    std::memcpy(p, buffer, c * sizeof(float));
  }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Splat(float f) { return _mm256_set1_ps(f); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Abs(F a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Finite(F a, size_t* nonfinite) {
    const F finite = _mm256_cmp_ps(Abs(a), _mm256_set1_ps(INFINITY), _CMP_LT_OQ);
    *nonfinite += static_cast<size_t>(__builtin_popcount(~_mm256_movemask_ps(finite) & 0xFF));
    return _mm256_and_ps(a, finite);
  }
  // vcvtps2dq rounds in the MXCSR mode, which is the default nearest-even.
  static I Quantize(F a) {
    const I q = _mm256_cvtps_epi32(a);
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
  }
  static F ToFloat(I a) { return _mm256_cvtepi32_ps(a); }
  static I LoadInt8(const int8_t* p, size_t c) {
    int8_t buffer[kLanes] = {};
    std::memcpy(buffer, p, c);
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(buffer)));
  }
  static void StoreInt8(int8_t* p, I a, size_t c) {
    // The low byte of each int32 (exact: |a| <= 127), gathered from both 128-bit halves.
    const __m256i low_bytes = _mm256_shuffle_epi8(
        a, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                            12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i packed = _mm_unpacklo_epi32(_mm256_castsi256_si128(low_bytes),
                                              _mm256_extracti128_si256(low_bytes, 1));
    int8_t buffer[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer), packed);
    std::memcpy(p, buffer, c);
  }
  static uint32_t SignMask(F a) {
    return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, Zero(), _CMP_GE_OQ)));
  }
  static F SignSelect(uint32_t mask, F s) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i set =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(mask)), bit), bit);
    const F negated = _mm256_xor_ps(s, _mm256_set1_ps(-0.0f));
    return _mm256_blendv_ps(negated, s, _mm256_castsi256_ps(set));
  }
  static D ZeroD() { return D{_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static D AddWidened(D d, F a) {
    return D{_mm256_add_pd(d.low, _mm256_cvtps_pd(_mm256_castps256_ps128(a))),
             _mm256_add_pd(d.high, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)))};
  }
  static void StoreD(double* p, D d) {
    _mm256_storeu_pd(p, d.low);
    _mm256_storeu_pd(p + 4, d.high);
  }
};

}  // namespace

constinit const CodecKernels kAvx2CodecKernels = MakeCodecKernels<Avx2Lanes>();

}  // namespace weft::kernels_internal
