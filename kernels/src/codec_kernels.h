// The int8 and sign codec loops, written once over a per-level "codec lane" traits type L, and
// the per-level tables codec.cc dispatches through.
//
//   L::kLanes                        elements per register: 8 or 16 (a divisor of kSumLanes)
//   L::F / L::I / L::D               registers of kLanes floats, int32s, and a pair of fp64 halves
//   L::Load(p, c) / L::Store(p, r, c)
//                                    the first c <= kLanes floats; lanes c.. load as +0, and no
//                                    memory beyond the c elements is touched
//   L::Zero(), L::Splat(f), L::Add, L::Sub, L::Mul, L::Div, L::Abs
//   L::Max(a, b)                     for non-negative, non-NaN lanes
//   L::Finite(v, &count)             v with its NaN and infinite lanes replaced by +0; adds how
//                                    many there were to count
//   L::Quantize(f)                   round to nearest-even, clamp to [-127, 127], as int32 lanes
//   L::ToFloat(i)                    int32 lanes to fp32 (exact here)
//   L::LoadInt8(p, c) / L::StoreInt8(p, i, c)
//                                    c int8 elements, widened / narrowed
//   L::SignMask(v)                   bit j set when lane j >= 0 (for -0 too)
//   L::SignSelect(mask, s)           lane j = s where bit j of mask is set, else -s (negation)
//   L::ZeroD(), L::AddWidened(d, f), L::StoreD(p, d)
//                                    fp64 accumulation of kLanes lanes, stored as kLanes doubles
//
// Every level instantiates BlockCodec with traits defined in its own anonymous namespace, so the
// instantiations have internal linkage and carry that unit's target flags. This header must hold
// templates and declarations only: a non-template inline function here would be emitted by
// several units compiled for different instruction sets. Per-block scalar steps (the horizontal
// max, the fixed-order sum, the scale) are plain C++ in the template, hence identical per level.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::kernels_internal {

// Encodes n elements of x (plus error, when error is not null) in blocks of `block`: the block
// scales go to `scales` (4 bytes each, unaligned), the elements to `payload`; with error, leaves
// the feedback remainder in it. Returns the count of non-finite inputs.
using CodecEncodeFn = size_t (*)(const float* x, float* error, size_t n, size_t block,
                                 uint8_t* scales, uint8_t* payload);
// out = decode (add == false) or out + decode (add == true).
using CodecDecodeFn = void (*)(const uint8_t* scales, const uint8_t* payload, size_t n,
                               size_t block, float* out, bool add);

struct CodecKernels {
  CodecEncodeFn encode_int8;
  CodecDecodeFn decode_int8;
  CodecEncodeFn encode_sign;
  CodecDecodeFn decode_sign;
};

extern const CodecKernels kScalarCodecKernels;
extern const CodecKernels kAvx2CodecKernels;
extern const CodecKernels kAvx512CodecKernels;

// The sign codec's mean sums |x| into this many partial sums, element j into sum j mod 16.
inline constexpr size_t kSumLanes = 16;

template <typename L>
struct BlockCodec {
  using F = typename L::F;
  using I = typename L::I;
  using D = typename L::D;
  static constexpr size_t kLanes = L::kLanes;
  static_assert(kSumLanes % kLanes == 0, "a register must hold a whole number of sum lanes");

  static size_t EncodeInt8(const float* x, float* error, size_t n, size_t block, uint8_t* scales,
                           uint8_t* payload) {
    size_t nonfinite = 0;
    auto* q = reinterpret_cast<int8_t*>(payload);
    for (size_t start = 0, b = 0; start < n; start += block, ++b) {
      const size_t len = std::min(block, n - start);
      nonfinite += EncodeInt8Block(x + start, error == nullptr ? nullptr : error + start, len,
                                   scales + 4 * b, q + start);
    }
    return nonfinite;
  }

  static void DecodeInt8(const uint8_t* scales, const uint8_t* payload, size_t n, size_t block,
                         float* out, bool add) {
    const auto* q = reinterpret_cast<const int8_t*>(payload);
    for (size_t start = 0, b = 0; start < n; start += block, ++b) {
      const F s = L::Splat(LoadScale(scales + 4 * b));
      const size_t len = std::min(block, n - start);
      for (size_t i = 0; i < len; i += kLanes) {
        const size_t c = std::min(kLanes, len - i);
        const F d = L::Mul(L::ToFloat(L::LoadInt8(q + start + i, c)), s);
        Emit(out + start + i, d, c, add);
      }
    }
  }

  static size_t EncodeSign(const float* x, float* error, size_t n, size_t block, uint8_t* scales,
                           uint8_t* payload) {
    size_t nonfinite = 0;
    const size_t block_bytes = (block + 7) / 8;
    for (size_t start = 0, b = 0; start < n; start += block, ++b) {
      const size_t len = std::min(block, n - start);
      nonfinite += EncodeSignBlock(x + start, error == nullptr ? nullptr : error + start, len,
                                   scales + 4 * b, payload + b * block_bytes);
    }
    return nonfinite;
  }

  static void DecodeSign(const uint8_t* scales, const uint8_t* payload, size_t n, size_t block,
                         float* out, bool add) {
    const size_t block_bytes = (block + 7) / 8;
    for (size_t start = 0, b = 0; start < n; start += block, ++b) {
      const F s = L::Splat(LoadScale(scales + 4 * b));
      const uint8_t* bits = payload + b * block_bytes;
      const size_t len = std::min(block, n - start);
      for (size_t i = 0; i < len; i += kLanes) {
        const size_t c = std::min(kLanes, len - i);
        Emit(out + start + i, L::SignSelect(LoadBits(bits + i / 8, c), s), c, add);
      }
    }
  }

 private:
  // fl(m / 127), stepped toward zero where 127 * scale would overflow (m = FLT_MAX).
  static float Int8Scale(float m) {
    const float scale = m / 127.0f;
    return std::isinf(127.0f * scale) ? std::nextafter(scale, 0.0f) : scale;
  }

  static float LoadScale(const uint8_t* p) {
    float scale;
    std::memcpy(&scale, p, sizeof scale);
    return scale;
  }

  // The c elements of x (+ error) at i, non-finite lanes as +0, counted into `nonfinite`.
  static F Input(const float* x, const float* error, size_t i, size_t c, size_t* nonfinite) {
    F v = L::Load(x + i, c);
    if (error != nullptr) v = L::Add(v, L::Load(error + i, c));
    return L::Finite(v, nonfinite);
  }

  static void Emit(float* out, F d, size_t c, bool add) {
    L::Store(out, add ? L::Add(L::Load(out, c), d) : d, c);
  }

  // Calls fn(i, c, v) for the block's registers in order, v holding the c inputs at i (see
  // Input). Returns the count of non-finite inputs.
  template <typename Fn>
  static size_t ForEachRegister(const float* x, const float* error, size_t len, Fn fn) {
    size_t nonfinite = 0;
    for (size_t i = 0; i < len; i += kLanes) {
      const size_t c = std::min(kLanes, len - i);
      fn(i, c, Input(x, error, i, c, &nonfinite));
    }
    return nonfinite;
  }

  // Writes the block's scale to the encoded bytes and returns it in every lane.
  static F PutScale(uint8_t* scale_out, float scale) {
    std::memcpy(scale_out, &scale, sizeof scale);
    return L::Splat(scale);
  }

  // Two passes over the block (the second finds it in L1): the scale, then the elements.
  static size_t EncodeInt8Block(const float* x, float* error, size_t len, uint8_t* scale_out,
                                int8_t* q) {
    F peak = L::Zero();
    const size_t nonfinite = ForEachRegister(
        x, error, len, [&](size_t, size_t, F v) { peak = L::Max(peak, L::Abs(v)); });
    float lanes[kLanes];
    L::Store(lanes, peak, kLanes);
    float m = 0.0f;
    for (float lane : lanes) m = std::max(m, lane);
    const float scale = Int8Scale(m);
    const F s = PutScale(scale_out, scale);
    ForEachRegister(x, error, len, [&](size_t i, size_t c, F v) {
      const I qi = L::Quantize(scale > 0.0f ? L::Div(v, s) : L::Zero());
      L::StoreInt8(q + i, qi, c);
      if (error != nullptr) L::Store(error + i, L::Sub(v, L::Mul(L::ToFloat(qi), s)), c);
    });
    return nonfinite;
  }

  static size_t EncodeSignBlock(const float* x, float* error, size_t len, uint8_t* scale_out,
                                uint8_t* bits) {
    constexpr size_t kAccumulators = kSumLanes / kLanes;
    D sums[kAccumulators];
    for (D& sum : sums) sum = L::ZeroD();
    const size_t nonfinite = ForEachRegister(x, error, len, [&](size_t i, size_t, F v) {
      D& sum = sums[i / kLanes % kAccumulators];
      sum = L::AddWidened(sum, L::Abs(v));
    });
    double partial[kSumLanes];
    for (size_t a = 0; a < kAccumulators; ++a) L::StoreD(partial + a * kLanes, sums[a]);
    for (size_t width = kSumLanes / 2; width >= 1; width /= 2) {
      for (size_t j = 0; j < width; ++j) partial[j] += partial[j + width];
    }
    const F s = PutScale(scale_out, static_cast<float>(partial[0] / static_cast<double>(len)));
    ForEachRegister(x, error, len, [&](size_t i, size_t c, F v) {
      // Lanes past c are +0 and would read as set bits: the block's padding bits must be 0.
      const uint32_t mask = L::SignMask(v) & LowBits(c);
      for (size_t k = 0; k < (c + 7) / 8; ++k) {
        bits[i / 8 + k] = static_cast<uint8_t>(mask >> 8 * k);
      }
      if (error != nullptr) L::Store(error + i, L::Sub(v, L::SignSelect(mask, s)), c);
    });
    return nonfinite;
  }

  static uint32_t LowBits(size_t c) { return c >= 32 ? ~uint32_t{0} : (uint32_t{1} << c) - 1; }

  // The mask of c elements starting at byte `bits`; reads only their ceil(c / 8) bytes.
  static uint32_t LoadBits(const uint8_t* bits, size_t c) {
    uint32_t mask = 0;
    for (size_t k = 0; k < (c + 7) / 8; ++k) mask |= static_cast<uint32_t>(bits[k]) << 8 * k;
    return mask;
  }
};

template <typename L>
constexpr CodecKernels MakeCodecKernels() {
  return CodecKernels{&BlockCodec<L>::EncodeInt8, &BlockCodec<L>::DecodeInt8,
                      &BlockCodec<L>::EncodeSign, &BlockCodec<L>::DecodeSign};
}

}  // namespace weft::kernels_internal
