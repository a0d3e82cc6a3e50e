// Mixed precision's steps: rounding to a 16-bit format's values in place (equal to a narrowing
// then a widening, element by element, across tile boundaries), packing, the overflow check and
// scaling.
#include "weft/kernels/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "weft/kernels/convert.h"

namespace weft::testing {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

std::vector<float> Inputs(size_t n) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = bits(rng);
    std::memcpy(&v[i], &b, sizeof(b));
  }
  v[0] = 65504.0f;  // fp16's largest
  v[1] = 65520.0f;  // rounds past it: infinity in fp16
  v[2] = -0.0f;
  v[3] = 1e-8f;  // an fp16 subnormal
  return v;
}

TEST(PrecisionTest, RoundToEqualsNarrowingThenWidening) {
  const size_t n = 2048 * 3 + 17;  // several tiles and a tail
  for (Precision p : {Precision::kBFloat16, Precision::kFloat16}) {
    std::vector<float> data = Inputs(n);
    std::vector<float> expected(n);
    for (size_t i = 0; i < n; ++i) {
      expected[i] = p == Precision::kBFloat16 ? BFloat16ToFloat(FloatToBFloat16(data[i]))
                                              : HalfToFloat(FloatToHalf(data[i]));
    }
    RoundTo(p, data.data(), n);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(expected[i])) {
        ASSERT_TRUE(std::isnan(data[i])) << i;
      } else {
        ASSERT_EQ(Bits(data[i]), Bits(expected[i])) << "element " << i;
      }
    }
    // Rounded values pack into 16 bits and back without loss.
    std::vector<uint16_t> packed(n);
    std::vector<float> back(n);
    Narrow(p, data.data(), packed.data(), n);
    Widen(p, packed.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      if (!std::isnan(data[i])) {
        ASSERT_EQ(Bits(back[i]), Bits(data[i])) << i;
      }
    }
  }
  std::vector<float> overflow = {65520.0f, -1e6f, 3.0f};
  RoundTo(Precision::kFloat16, overflow.data(), overflow.size());
  EXPECT_EQ(overflow[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(overflow[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(overflow[2], 3.0f);
  std::vector<float> same = {1.0f + 1e-7f};
  RoundTo(Precision::kFloat32, same.data(), 1);
  EXPECT_EQ(same[0], 1.0f + 1e-7f);
}

TEST(PrecisionTest, AllFiniteFindsEveryInfinityAndNan) {
  const size_t n = 1000;
  std::vector<float> data(n, 1.5f);
  EXPECT_TRUE(AllFinite(data.data(), n));
  EXPECT_TRUE(AllFinite(data.data(), 0));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    for (size_t at : {size_t{0}, size_t{511}, n - 1}) {
      data[at] = bad;
      EXPECT_FALSE(AllFinite(data.data(), n)) << bad << " at " << at;
      data[at] = std::numeric_limits<float>::max();
      EXPECT_TRUE(AllFinite(data.data(), n));
    }
  }
}

TEST(PrecisionTest, ScaleMultipliesEachElementOnce) {
  std::vector<float> data = Inputs(333);
  std::vector<float> expected = data;
  const float factor = 1.0f / 65536.0f * 0.37f;
  for (float& x : expected) x *= factor;
  Scale(data.data(), data.size(), factor);
  for (size_t i = 0; i < data.size(); ++i) {
    if (!std::isnan(expected[i])) {
      ASSERT_EQ(Bits(data[i]), Bits(expected[i])) << i;
    }
  }
}

}  // namespace
}  // namespace weft::testing
