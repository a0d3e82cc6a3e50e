// DivideBy, the last step of kAvg: truncating integer division (wrapping, any non-zero divisor)
// and one IEEE division per element for floats, identical at every SIMD level.
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "reference.h"
#include "weft/kernels/reduce.h"

namespace weft::testing {
namespace {

constexpr int kDivisors[] = {2,       3,       7,  10, 255, 256, 1000,  65537,
                             1 << 30, INT_MAX, -1, -2, -3,  -7,  -1000, INT_MIN};
constexpr size_t kCounts[] = {1, 7, 63, 1000, 4097};

class DivideTest : public ::testing::Test {
 protected:
  void SetUp() override { initial_level_ = ActiveSimdLevel(); }
  void TearDown() override { SetSimdLevelForTesting(initial_level_); }

 private:
  SimdLevel initial_level_ = SimdLevel::kScalar;
};

template <typename T>
T RefIntegerDivide(T x, int divisor) {
  // 128-bit arithmetic cannot overflow here; the cast back reduces modulo 2^bits.
  const __int128 q = static_cast<__int128>(x) / divisor;
  return static_cast<T>(static_cast<unsigned __int128>(q));
}

// Random values with the extremes mixed in.
template <typename S>
std::vector<S> DivideInputs(std::mt19937_64& rng, size_t count) {
  std::vector<S> data(count);
  for (auto& x : data) {
    const uint64_t bits = rng();
    if constexpr (std::is_integral_v<S>) {
      switch (bits % 8) {
        case 0:
          x = std::numeric_limits<S>::min();
          break;
        case 1:
          x = std::numeric_limits<S>::max();
          break;
        case 2:
          x = static_cast<S>(bits >> 56);  // small values
          break;
        default:
          std::memcpy(&x, &bits, sizeof(S));
      }
    } else {
      std::memcpy(&x, &bits, sizeof(S));
    }
  }
  return data;
}

template <DataType kType>
void CheckDivide(uint64_t seed) {
  std::mt19937_64 rng(seed);
  using S = typename RefTraits<kType>::Storage;
  using C = typename RefTraits<kType>::Compute;
  for (size_t count : kCounts) {
    const std::vector<S> input = DivideInputs<S>(rng, count);
    for (int divisor : kDivisors) {
      std::vector<S> expected(count);
      for (size_t i = 0; i < count; ++i) {
        if constexpr (std::is_integral_v<C>) {
          expected[i] = RefIntegerDivide(input[i], divisor);
        } else {
          expected[i] = RefStore<kType>(RefLoad<kType>(input[i]) / static_cast<C>(divisor));
        }
      }
      for (SimdLevel level : kAllLevels) {
        if (!CpuSupports(level)) continue;
        SetSimdLevelForTesting(level);
        std::vector<S> data = input;
        data.push_back(S{});  // A guard element beyond `count`.
        DivideBy(kType, data.data(), count, divisor);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_TRUE(SameBits(data[i], expected[i]))
              << Name(kType) << " " << Name(level) << " element " << i << " of " << count
              << " divided by " << divisor;
        }
        ASSERT_TRUE(SameBits(data[count], S{})) << "wrote past the end";

        // Again from the second element, which shifts the head before the first aligned block.
        data = input;
        DivideBy(kType, data.data() + 1, count - 1, divisor);
        ASSERT_TRUE(SameBits(data[0], input[0])) << "wrote before the start";
        for (size_t i = 1; i < count; ++i) {
          ASSERT_TRUE(SameBits(data[i], expected[i]))
              << Name(kType) << " " << Name(level) << " element " << i << " of " << count
              << " divided by " << divisor << ", starting at element 1";
        }
      }
    }
  }
}

TEST_F(DivideTest, Int8) { CheckDivide<DataType::kInt8>(1); }
TEST_F(DivideTest, Uint8) { CheckDivide<DataType::kUint8>(2); }
TEST_F(DivideTest, Int32) { CheckDivide<DataType::kInt32>(3); }
TEST_F(DivideTest, Uint32) { CheckDivide<DataType::kUint32>(4); }
TEST_F(DivideTest, Int64) { CheckDivide<DataType::kInt64>(5); }
TEST_F(DivideTest, Uint64) { CheckDivide<DataType::kUint64>(6); }
TEST_F(DivideTest, Float16) { CheckDivide<DataType::kFloat16>(7); }
TEST_F(DivideTest, BFloat16) { CheckDivide<DataType::kBFloat16>(8); }
TEST_F(DivideTest, Float32) { CheckDivide<DataType::kFloat32>(9); }
TEST_F(DivideTest, Float64) { CheckDivide<DataType::kFloat64>(10); }

TEST_F(DivideTest, NegativeIntegersTruncateTowardZero) {
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<int32_t> i32 = {-7, -8, -1, 7, INT32_MIN, INT32_MIN};
    DivideBy(DataType::kInt32, i32.data(), 5, 2);
    DivideBy(DataType::kInt32, i32.data() + 5, 1, -1);
    EXPECT_EQ(i32, (std::vector<int32_t>{-3, -4, 0, 3, INT32_MIN / 2, INT32_MIN})) << Name(level);
    std::vector<int8_t> i8 = {-7, -128, 127, -128};
    DivideBy(DataType::kInt8, i8.data(), 3, -3);
    DivideBy(DataType::kInt8, i8.data() + 3, 1, -1);
    EXPECT_EQ(i8, (std::vector<int8_t>{2, 42, -42, -128})) << Name(level);
    std::vector<int64_t> i64 = {-7, INT64_MIN, INT64_MAX};
    DivideBy(DataType::kInt64, i64.data(), 3, 4);
    EXPECT_EQ(i64, (std::vector<int64_t>{-1, INT64_MIN / 4, INT64_MAX / 4})) << Name(level);
    std::vector<uint32_t> u32 = {7, 0xFFFFFFFF};
    DivideBy(DataType::kUint32, u32.data(), 2, -2);  // -(x / 2) modulo 2^32
    EXPECT_EQ(u32, (std::vector<uint32_t>{0xFFFFFFFD, 0x80000001})) << Name(level);
  }
}

TEST_F(DivideTest, FloatDivisionIsExactWhereTheQuotientIs) {
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    // x * (1/3) differs from x / 3 for many x; the kernels must divide.
    std::vector<float> f = {3.0f, 9.0f, 0.3f * 3, 21.0f, 1e30f * 3};
    std::vector<float> expected;
    for (float x : f) expected.push_back(x / 3.0f);
    DivideBy(DataType::kFloat32, f.data(), f.size(), 3);
    EXPECT_EQ(f, expected) << Name(level);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[3], 7.0f);
    std::vector<double> d = {49.0, -14.0};
    DivideBy(DataType::kFloat64, d.data(), d.size(), 7);
    EXPECT_EQ(d, (std::vector<double>{7.0, -2.0})) << Name(level);
  }
}

TEST_F(DivideTest, DivisorOneAndIntegerZeroLeaveDataUnchanged) {
  std::vector<int32_t> ints = {5, -5};
  DivideBy(DataType::kInt32, ints.data(), ints.size(), 0);
  DivideBy(DataType::kInt32, ints.data(), ints.size(), 1);
  EXPECT_EQ(ints, (std::vector<int32_t>{5, -5}));
  std::vector<float> floats = {1.0f, -1.0f};
  DivideBy(DataType::kFloat32, floats.data(), floats.size(), 0);
  EXPECT_EQ(floats, (std::vector<float>{INFINITY, -INFINITY}));
}

}  // namespace
}  // namespace weft::testing
