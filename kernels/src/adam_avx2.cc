// The AVX2 AdamW loop (8 floats per register). The head before the parameters are aligned to a
// register, and the tail, are staged through zeroed stack buffers of one register each, so they
// run the same instructions as whole blocks.
//
// Compiled with -mavx2 -mf16c; everything but the table of loops has internal linkage (see
// adam_kernels.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "adam_kernels.h"

namespace weft::kernels_internal {
namespace {

constexpr size_t kLanes = 8;

// This level's lane traits for adam_simd::Update.
struct Lanes {
  using Reg = __m256;
  static Reg Set1(float x) { return _mm256_set1_ps(x); }
  static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg Sqrt(Reg a) { return _mm256_sqrt_ps(a); }
};
using Constants = adam_simd::Constants<Lanes>;
using adam_simd::Update;

// fp32 -> bf16, nearest-even: add 0x7FFF plus the lowest kept bit, keep the top half. A NaN
// instead sets its quiet bit and keeps its top half, as FloatToBFloat16 does.
[[gnu::always_inline]] inline __m128i ToBFloat16(__m256 p) {
  const __m256i bits = _mm256_castps_si256(p);
  const __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i biased =
      _mm256_add_epi32(bits, _mm256_add_epi32(kept_lsb, _mm256_set1_epi32(0x7FFF)));
  const __m256i quieted = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
  const __m256i top = _mm256_srli_epi32(_mm256_blendv_epi8(biased, quieted, nan), 16);
  // Every lane is below 2^16, so the saturating pack only narrows.
  return _mm_packus_epi32(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
}

// Elements [i, i + 8). Always inlined, like Update.
template <bool kCopy>
[[gnu::always_inline]] inline void Block(const Constants& k, float* p, const float* g, float* m,
                                         float* v, uint16_t* bf16, size_t i) {
  __m256 mr = _mm256_loadu_ps(m + i);
  __m256 vr = _mm256_loadu_ps(v + i);
  const __m256 pr = Update<Lanes>(k, _mm256_loadu_ps(p + i), _mm256_loadu_ps(g + i), mr, vr);
  _mm256_storeu_ps(p + i, pr);
  _mm256_storeu_ps(m + i, mr);
  _mm256_storeu_ps(v + i, vr);
  if constexpr (kCopy) _mm_storeu_si128(reinterpret_cast<__m128i*>(bf16 + i), ToBFloat16(pr));
}

// count < 8 elements, through one block of stack buffers; nothing past them is touched.
template <bool kCopy>
void Partial(const Constants& k, float* p, const float* g, float* m, float* v, uint16_t* bf16,
             size_t count) {
  if (count == 0) return;
  float pb[kLanes] = {}, gb[kLanes] = {}, mb[kLanes] = {}, vb[kLanes] = {};
  uint16_t bb[kLanes];
  const size_t bytes = count * sizeof(float);
  std::memcpy(pb, p, bytes);
  std::memcpy(gb, g, bytes);
  std::memcpy(mb, m, bytes);
  std::memcpy(vb, v, bytes);
  Block<kCopy>(k, pb, gb, mb, vb, bb, 0);
  std::memcpy(p, pb, bytes);
  std::memcpy(m, mb, bytes);
  std::memcpy(v, vb, bytes);
  if constexpr (kCopy) std::memcpy(bf16, bb, count * sizeof(uint16_t));
}

// Whole blocks start where the parameters are aligned to a register: they are the array whose
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
  Partial<kCopy>(k, p, g, m, v, bf16, head);
  size_t i = head;
  for (; i + kLanes <= n; i += kLanes) Block<kCopy>(k, p, g, m, v, bf16, i);
  Partial<kCopy>(k, p + i, g + i, m + i, v + i, kCopy ? bf16 + i : nullptr, n - i);
}

}  // namespace

constinit const AdamWLoops kAvx2AdamW = {&Loop<false>, &Loop<true>};

}  // namespace weft::kernels_internal
