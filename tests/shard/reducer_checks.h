// What the reducer workers (one rank each, started by weftrun) share: checks that report instead of
// aborting, and the gradient values of the 16-bit wire tests with the result they must give.
//
// Wire values: rank r's element i of gradient (or unit) k is w·(1 + 2^-13), w a small integer
// times a power of two that depends on (k, i) only, so its rounding to fp16 or bf16 is w while
// fp32 keeps the 2^-13; every fourth element is a tiny m·2^-26 instead, exact in bf16 and fp32
// but rounded to a multiple of 2^-24 (a subnormal) in fp16. The rounded values of up to four ranks
// sum exactly in every one of these types, so the average does not depend on the order a
// collective adds them in: the expected value is computed here the documented way, each rank's
// value rounded to the wire type, summed, divided by the rank count and rounded once.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "weft/kernels/convert.h"
#include "weft/kernels/dtype.h"

namespace weft::testing {

inline int failures = 0;
inline int rank = 0;  // this process's rank in the whole job

inline void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

inline void CheckOk(const absl::Status& s, const std::string& what) {
  Check(s.ok(), absl::StrCat(what, ": ", s.ToString()));
}

inline float WireValue(int r, size_t k, size_t i) {
  const int m = static_cast<int>((k * 5 + i * 3 + static_cast<size_t>(r) * 7) % 15) - 7;
  if (i % 4 == 3) return std::ldexp(static_cast<float>(m), -26);
  const int e = static_cast<int>((k + i) % 5) - 2;
  return std::ldexp(static_cast<float>(m) * (1.0f + 0x1p-13f), e);
}

// `f` rounded to `wire` (to nearest, ties to even) and widened back; kFloat32 keeps it.
inline float RoundTo(DataType wire, float f) {
  if (wire == DataType::kBFloat16) return BFloat16ToFloat(FloatToBFloat16(f));
  if (wire == DataType::kFloat16) return HalfToFloat(FloatToHalf(f));
  return f;
}

// kAvg over `values` (each already of the wire type) as a collective of that type computes it.
inline float AverageIn(DataType wire, const std::vector<float>& values) {
  float sum = 0;
  for (float v : values) sum += v;  // exact for the wire values
  return RoundTo(wire, sum / static_cast<float>(values.size()));
}

// Element i of gradient k averaged over `ranks` through a `wire` all-reduce.
inline float WireAverage(DataType wire, const std::vector<int>& ranks, size_t k, size_t i) {
  std::vector<float> rounded;
  for (int r : ranks) rounded.push_back(RoundTo(wire, WireValue(r, k, i)));
  return AverageIn(wire, rounded);
}

}  // namespace weft::testing
