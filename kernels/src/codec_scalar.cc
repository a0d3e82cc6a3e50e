// The portable codec lanes: plain C++ over arrays of eight, baseline x86-64 (the compiler may
// vectorise them with SSE2). The reference the wider levels must match bit for bit.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec_kernels.h"

namespace weft::kernels_internal {
namespace {

struct ScalarLanes {
  static constexpr size_t kLanes = 8;
  struct F {
    float v[kLanes];
  };
  struct I {
    int32_t v[kLanes];
  };
  struct D {
    double v[kLanes];
  };

  template <typename R, typename Fn>
  static R Map(Fn fn) {
    R r;
    for (size_t j = 0; j < kLanes; ++j) r.v[j] = fn(j);
    return r;
  }

  static F Load(const float* p, size_t c) {
    F r{};
    std::memcpy(r.v, p, c * sizeof(float));
    return r;
  }
  static void Store(float* p, F r, size_t c) { std::memcpy(p, r.v, c * sizeof(float)); }
  static F Zero() { return F{}; }
  static F Splat(float f) {
    return Map<F>([f](size_t) { return f; });
  }
  static F Add(F a, F b) {
    return Map<F>([&](size_t j) { return a.v[j] + b.v[j]; });
  }
  static F Sub(F a, F b) {
    return Map<F>([&](size_t j) { return a.v[j] - b.v[j]; });
  }
  static F Mul(F a, F b) {
    return Map<F>([&](size_t j) { return a.v[j] * b.v[j]; });
  }
  static F Div(F a, F b) {
    return Map<F>([&](size_t j) { return a.v[j] / b.v[j]; });
  }
  static F Abs(F a) {
    return Map<F>([&](size_t j) { return std::fabs(a.v[j]); });
  }
  static F Max(F a, F b) {
    return Map<F>([&](size_t j) { return a.v[j] > b.v[j] ? a.v[j] : b.v[j]; });
  }
  static F Finite(F a, size_t* nonfinite) {
    for (float& lane : a.v) {
      if (!(std::fabs(lane) < INFINITY)) {
        lane = 0.0f;
        ++*nonfinite;
      }
    }
    return a;
  }
  // std::lrint rounds in the current mode, which is the default nearest-even; |f| < 2^8 here.
  static I Quantize(F a) {
    return Map<I>([&](size_t j) {
      const long q = std::lrint(a.v[j]);
      return static_cast<int32_t>(q < -127 ? -127 : q > 127 ? 127 : q);
    });
  }
  static F ToFloat(I a) {
    return Map<F>([&](size_t j) { return static_cast<float>(a.v[j]); });
  }
  static I LoadInt8(const int8_t* p, size_t c) {
    return Map<I>([&](size_t j) { return j < c ? p[j] : 0; });
  }
  static void StoreInt8(int8_t* p, I a, size_t c) {
    for (size_t j = 0; j < c; ++j) p[j] = static_cast<int8_t>(a.v[j]);
  }
  static uint32_t SignMask(F a) {
    uint32_t mask = 0;
    for (size_t j = 0; j < kLanes; ++j) mask |= (a.v[j] >= 0.0f ? 1u : 0u) << j;
    return mask;
  }
  static F SignSelect(uint32_t mask, F s) {
    return Map<F>([&](size_t j) { return (mask >> j & 1) != 0 ? s.v[j] : -s.v[j]; });
  }
  static D ZeroD() { return D{}; }
  static D AddWidened(D d, F a) {
    return Map<D>([&](size_t j) { return d.v[j] + static_cast<double>(a.v[j]); });
  }
  static void StoreD(double* p, D d) { std::memcpy(p, d.v, sizeof d.v); }
};

}  // namespace

constinit const CodecKernels kScalarCodecKernels = MakeCodecKernels<ScalarLanes>();

}  // namespace weft::kernels_internal
