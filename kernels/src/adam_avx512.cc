// The AVX-512 AdamW loop (16 floats per register; needs AVX512F and BW). The head before the
// parameters are aligned to a cache line, and the tail, run the same instructions under a mask.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl; everything but the table of loops has internal
// linkage (see adam_kernels.h).

// GCC 12's AVX-512 intrinsics initialise their "undefined" placeholder registers from
// themselves, which -W(maybe-)uninitialized reports at every use (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "adam_kernels.h"

namespace weft::kernels_internal {
namespace {

constexpr size_t kLanes = 16;

// This level's lane traits for adam_simd::Update.
struct Lanes {
  using Reg = __m512;
  static Reg Set1(float x) { return _mm512_set1_ps(x); }
  static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg Sqrt(Reg a) { return _mm512_sqrt_ps(a); }
};
using Constants = adam_simd::Constants<Lanes>;
using adam_simd::Update;

// fp32 -> bf16, nearest-even: add 0x7FFF plus the lowest kept bit, keep the top half. A NaN
// instead sets its quiet bit and keeps its top half, as FloatToBFloat16 does.
[[gnu::always_inline]] inline __m256i ToBFloat16(__m512 p) {
  const __m512i bits = _mm512_castps_si512(p);
  const __m512i kept_lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i biased =
      _mm512_add_epi32(bits, _mm512_add_epi32(kept_lsb, _mm512_set1_epi32(0x7FFF)));
  const __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
  const __m512i chosen = _mm512_mask_or_epi32(biased, nan, bits, _mm512_set1_epi32(0x00400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(chosen, 16));
}

// Elements [i, i + 16) when kWhole, else those of `mask` only (no other memory is touched).
// Always inlined, like Update.
template <bool kCopy, bool kWhole>
[[gnu::always_inline]] inline void Block(const Constants& k, float* p, const float* g, float* m,
                                         float* v, uint16_t* bf16, size_t i, __mmask16 mask) {
  __m512 pr, gr, mr, vr;
  if constexpr (kWhole) {
    pr = _mm512_loadu_ps(p + i);
    gr = _mm512_loadu_ps(g + i);
    mr = _mm512_loadu_ps(m + i);
    vr = _mm512_loadu_ps(v + i);
  } else {
    pr = _mm512_maskz_loadu_ps(mask, p + i);
    gr = _mm512_maskz_loadu_ps(mask, g + i);
    mr = _mm512_maskz_loadu_ps(mask, m + i);
    vr = _mm512_maskz_loadu_ps(mask, v + i);
  }
  pr = Update<Lanes>(k, pr, gr, mr, vr);
  if constexpr (kWhole) {
    _mm512_storeu_ps(p + i, pr);
    _mm512_storeu_ps(m + i, mr);
    _mm512_storeu_ps(v + i, vr);
    if constexpr (kCopy) _mm256_storeu_si256(reinterpret_cast<__m256i*>(bf16 + i), ToBFloat16(pr));
  } else {
    _mm512_mask_storeu_ps(p + i, mask, pr);
    _mm512_mask_storeu_ps(m + i, mask, mr);
    _mm512_mask_storeu_ps(v + i, mask, vr);
    if constexpr (kCopy) _mm256_mask_storeu_epi16(bf16 + i, mask, ToBFloat16(pr));
  }
}

__mmask16 FirstLanes(size_t count) { return static_cast<__mmask16>((1u << count) - 1); }

// Whole blocks start where the parameters are aligned to a cache line: they are the array whose
// lines are both read and written, and a store that splits lines costs twice. The other arrays
// are aligned too when they share that alignment, as buffers of one allocator usually do.
template <bool kCopy>
void Loop(const AdamWStep& s, float* p, const float* g, float* m, float* v, uint16_t* bf16,
          size_t n) {
  const Constants k(s);
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  size_t head =
      address % sizeof(float) == 0 ? (kLanes - address / sizeof(float) % kLanes) % kLanes : 0;
  if (head > n) head = n;
  if (head != 0) Block<kCopy, false>(k, p, g, m, v, bf16, 0, FirstLanes(head));
  size_t i = head;
  for (; i + kLanes <= n; i += kLanes) Block<kCopy, true>(k, p, g, m, v, bf16, i, 0);
  if (i < n) Block<kCopy, false>(k, p, g, m, v, bf16, i, FirstLanes(n - i));
}

}  // namespace

constinit const AdamWLoops kAvx512AdamW = {&Loop<false>, &Loop<true>};

}  // namespace weft::kernels_internal
