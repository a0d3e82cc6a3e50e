// fp16 / bf16 conversions: exhaustive over every 16-bit input, and over every rounding boundary
// of the narrowing direction, for the scalar functions and the bulk ones at every SIMD level.
#include "weft/kernels/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace weft::testing {
namespace {

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override { initial_level_ = ActiveSimdLevel(); }
  void TearDown() override { SetSimdLevelForTesting(initial_level_); }

 private:
  SimdLevel initial_level_ = SimdLevel::kScalar;
};

std::vector<uint16_t> AllCodes() {
  std::vector<uint16_t> codes(65536);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
  return codes;
}

// Floats at and around every rounding boundary of a 16-bit format whose finite non-negative
// codes are [0, limit): each value, the midpoint to the next code, and the floats on either side
// of that midpoint; plus random bit patterns. `to_float` decodes a code exactly.
template <typename Decode>
std::vector<float> NarrowingInputs(uint16_t limit, Decode to_float) {
  std::vector<float> inputs;
  for (uint32_t code = 0; code + 1 < limit; ++code) {
    const float here = to_float(static_cast<uint16_t>(code));
    const float next = to_float(static_cast<uint16_t>(code + 1));
    const float middle = static_cast<float>((static_cast<double>(here) + next) / 2);
    for (float sign : {1.0f, -1.0f}) {
      inputs.push_back(sign * here);
      inputs.push_back(sign * middle);
      inputs.push_back(sign * std::nextafter(middle, 0.0f));
      inputs.push_back(sign * std::nextafter(middle, INFINITY));
    }
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 100003; ++i)
    inputs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return inputs;
}

TEST_F(ConvertTest, HalfToFloatIsExactForEveryCode) {
  const std::vector<uint16_t> codes = AllCodes();
  for (uint16_t code : codes) {
    ASSERT_TRUE(SameBits(HalfToFloat(code), RefHalfToFloat(code))) << std::hex << code;
  }
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<float> out(codes.size());
    HalfToFloat(codes.data(), out.data(), codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      ASSERT_TRUE(SameBits(out[i], RefHalfToFloat(codes[i]))) << Name(level) << std::hex << i;
    }
  }
}

TEST_F(ConvertTest, HalfRoundTripsAndQuietsNans) {
  for (uint32_t code = 0; code < 65536; ++code) {
    const auto h = static_cast<uint16_t>(code);
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)), nan ? (h | 0x0200) : h) << std::hex << code;
  }
}

TEST_F(ConvertTest, FloatToHalfRoundsToNearestEven) {
  const std::vector<float> inputs = NarrowingInputs(0x7C00, RefHalfToFloat);
  for (float f : inputs) {
    ASSERT_EQ(FloatToHalf(f), RefFloatToHalf(f)) << std::hex << std::bit_cast<uint32_t>(f);
  }
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<uint16_t> out(inputs.size());
    FloatToHalf(inputs.data(), out.data(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(out[i], RefFloatToHalf(inputs[i]))
          << Name(level) << std::hex << " input " << std::bit_cast<uint32_t>(inputs[i]);
    }
  }
}

TEST_F(ConvertTest, FloatToHalfTrickyValues) {
  const struct {
    uint32_t input;
    uint16_t expected;
  } cases[] = {
      {0x3F801000, 0x3C00},  // 1 + 2^-11: tie between 1 and 1 + 2^-10, to the even 1
      {0x3F803000, 0x3C02},  // 1 + 3 * 2^-11: tie, to the even 1 + 2^-9
      {0x3F801001, 0x3C01},  // just above the tie
      {0x477FE000, 0x7BFF},  // 65504, the largest half
      {0x477FEFFF, 0x7BFF},  // just below 65520
      {0x477FF000, 0x7C00},  // 65520: tie between 65504 and 2^16, to infinity
      {0x7F7FFFFF, 0x7C00},  // FLT_MAX
      {0x33800000, 0x0001},  // 2^-24, the smallest subnormal
      {0x33000000, 0x0000},  // 2^-25: tie, to zero
      {0x33000001, 0x0001},  // just above 2^-25
      {0x33C00000, 0x0002},  // 3 * 2^-25: tie between 1 and 2 units, to 2
      {0x387FE000, 0x0400},  // 2^-14 - 2^-25: tie between 0x03FF and 0x0400, to 0x0400
      {0x00000001, 0x0000},  // fp32 subnormal
      {0x80000001, 0x8000},  // negative fp32 subnormal keeps its sign
      {0x80000000, 0x8000},  // -0
      {0x7F800000, 0x7C00},  // +inf
      {0xFF800000, 0xFC00},  // -inf
      {0x7FC00000, 0x7E00},  // quiet NaN
      {0x7F800001, 0x7E00},  // signalling NaN, payload below fp16 precision: quieted
      {0x7F802000, 0x7E01},  // NaN payload kept in the top bits
      {0xFFFFFFFF, 0xFFFF},  // negative NaN, full payload
  };
  for (const auto& c : cases) {
    const float f = std::bit_cast<float>(c.input);
    EXPECT_EQ(FloatToHalf(f), c.expected) << std::hex << c.input;
    EXPECT_EQ(RefFloatToHalf(f), c.expected) << "reference, " << std::hex << c.input;
  }
}

TEST_F(ConvertTest, BFloat16ToFloatIsExactForEveryCode) {
  const std::vector<uint16_t> codes = AllCodes();
  for (uint16_t code : codes) {
    ASSERT_TRUE(SameBits(BFloat16ToFloat(code), RefBFloat16ToFloat(code))) << std::hex << code;
  }
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<float> out(codes.size());
    BFloat16ToFloat(codes.data(), out.data(), codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      ASSERT_TRUE(SameBits(out[i], RefBFloat16ToFloat(codes[i]))) << Name(level) << std::hex << i;
    }
  }
}

TEST_F(ConvertTest, FloatToBFloat16RoundsToNearestEven) {
  const std::vector<float> inputs = NarrowingInputs(0x7F80, RefBFloat16ToFloat);
  for (float f : inputs) {
    ASSERT_EQ(FloatToBFloat16(f), RefFloatToBFloat16(f)) << std::hex << std::bit_cast<uint32_t>(f);
  }
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<uint16_t> out(inputs.size());
    FloatToBFloat16(inputs.data(), out.data(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(out[i], RefFloatToBFloat16(inputs[i]))
          << Name(level) << std::hex << " input " << std::bit_cast<uint32_t>(inputs[i]);
    }
  }
}

TEST_F(ConvertTest, FloatToBFloat16TrickyValues) {
  const struct {
    uint32_t input;
    uint16_t expected;
  } cases[] = {
      {0x3F808000, 0x3F80},  // 1 + 2^-8: tie, to the even 1
      {0x3F818000, 0x3F82},  // tie, to the even code above
      {0x3F808001, 0x3F81},  // just above the tie
      {0x7F7F7FFF, 0x7F7F},  // just below the tie with infinity
      {0x7F7F8000, 0x7F80},  // tie between the largest bf16 and 2^128: to infinity
      {0x00008000, 0x0000},  // subnormal tie, to zero
      {0x00018000, 0x0002},  // subnormal tie, to the even code above
      {0x80000000, 0x8000},  // -0
      {0xFF800000, 0xFF80},  // -inf
      {0x7F800001, 0x7FC0},  // signalling NaN: quieted
      {0xFF812345, 0xFFC1},  // NaN keeps sign and top payload bits
  };
  for (const auto& c : cases) {
    const float f = std::bit_cast<float>(c.input);
    EXPECT_EQ(FloatToBFloat16(f), c.expected) << std::hex << c.input;
    EXPECT_EQ(RefFloatToBFloat16(f), c.expected) << "reference, " << std::hex << c.input;
  }
}

// Bulk conversions of odd lengths, into outputs at odd offsets, must write exactly `count`
// elements.
TEST_F(ConvertTest, BulkConversionsWriteExactlyCount) {
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    for (size_t count : {size_t{1}, size_t{7}, size_t{63}, size_t{1000}, size_t{4097}}) {
      // Element `at - 1` guards the start, elements from `at + count` the end.
      for (size_t at : {size_t{1}, size_t{2}, size_t{6}}) {
        const std::string where = std::string(Name(level)) + " count " + std::to_string(count) +
                                  " at " + std::to_string(at);
        const std::vector<uint16_t> ones(count, 0x3C00);
        std::vector<float> floats(at + count + 40, 2.0f);
        HalfToFloat(ones.data(), floats.data() + at, count);
        EXPECT_EQ(floats[at - 1], 2.0f) << where;
        EXPECT_EQ(floats[at], 1.0f) << where;
        EXPECT_EQ(floats[at + count - 1], 1.0f) << where;
        EXPECT_EQ(floats[at + count], 2.0f) << where;

        std::vector<uint16_t> halves(at + count + 40, 0x7777);
        FloatToHalf(floats.data() + at, halves.data() + at, count);
        EXPECT_EQ(halves[at - 1], 0x7777) << where;
        EXPECT_EQ(halves[at], 0x3C00) << where;
        EXPECT_EQ(halves[at + count - 1], 0x3C00) << where;
        EXPECT_EQ(halves[at + count], 0x7777) << where;

        std::vector<uint16_t> bf(at + count + 40, 0x1234);
        FloatToBFloat16(floats.data() + at, bf.data() + at, count);
        EXPECT_EQ(bf[at - 1], 0x1234) << where;
        EXPECT_EQ(bf[at], 0x3F80) << where;
        EXPECT_EQ(bf[at + count - 1], 0x3F80) << where;
        EXPECT_EQ(bf[at + count], 0x1234) << where;

        std::vector<float> widened(at + count + 40, 2.0f);
        BFloat16ToFloat(bf.data() + at, widened.data() + at, count);
        EXPECT_EQ(widened[at - 1], 2.0f) << where;
        EXPECT_EQ(widened[at], 1.0f) << where;
        EXPECT_EQ(widened[at + count - 1], 1.0f) << where;
        EXPECT_EQ(widened[at + count], 2.0f) << where;
      }
    }
  }
}

}  // namespace
}  // namespace weft::testing
