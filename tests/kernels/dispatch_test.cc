// Choosing the SIMD level: CPU detection, the WEFT_SIMD override and the testing switch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>

#include "reference.h"
#include "weft/kernels/reduce.h"

namespace weft {

// Test names and CTest show the level by name.
void PrintTo(SimdLevel level, std::ostream* out) { *out << Name(level); }

namespace testing {
namespace {

SimdLevel BestLevel() {
  return CpuSupports(SimdLevel::kAvx512) ? SimdLevel::kAvx512
         : CpuSupports(SimdLevel::kAvx2) ? SimdLevel::kAvx2
                                         : SimdLevel::kScalar;
}

SimdLevel Lower(SimdLevel a, SimdLevel b) {
  return static_cast<int>(a) < static_cast<int>(b) ? a : b;
}

TEST(DispatchTest, Names) {
  EXPECT_STREQ(Name(SimdLevel::kScalar), "scalar");
  EXPECT_STREQ(Name(SimdLevel::kAvx2), "avx2");
  EXPECT_STREQ(Name(SimdLevel::kAvx512), "avx512");
}

TEST(DispatchTest, SetSimdLevelForTestingClampsToTheCpu) {
  const SimdLevel initial = ActiveSimdLevel();
  for (SimdLevel level : kAllLevels) {
    SetSimdLevelForTesting(level);
    EXPECT_EQ(ActiveSimdLevel(), Lower(level, BestLevel())) << Name(level);
    int32_t x = 2;
    const int32_t y = 3;
    ReduceInto(DataType::kInt32, ReduceOp::kProd, &x, &y, 1);
    EXPECT_EQ(x, 6) << Name(level);
  }
  SetSimdLevelForTesting(initial);
}

// One case per SIMD level: the kernel tests run each level the CPU has and pass over the others,
// so a level the CPU lacks shows as a skipped case naming it (scripts/run-tests lists both).
class SimdLevels : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(SimdLevels, KernelTestsRunAt) {
  const SimdLevel level = GetParam();
  if (!CpuSupports(level)) {
    GTEST_SKIP() << "this CPU lacks " << Name(level) << ": the kernel tests skip its kernels";
  }
  const SimdLevel initial = ActiveSimdLevel();
  SetSimdLevelForTesting(level);
  EXPECT_EQ(ActiveSimdLevel(), level);
  int32_t x = 2;
  const int32_t y = 3;
  ReduceInto(DataType::kInt32, ReduceOp::kProd, &x, &y, 1);
  EXPECT_EQ(x, 6);
  SetSimdLevelForTesting(initial);
}

INSTANTIATE_TEST_SUITE_P(Levels, SimdLevels, ::testing::ValuesIn(kAllLevels),
                         [](const auto& info) { return std::string(Name(info.param)); });

// The environment is read once per process, so each case runs in a fresh child process (the
// threadsafe death-test style re-executes this binary for just this test).
void ExpectLevelUnderEnvironment(const char* value, SimdLevel expected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("WEFT_SIMD", value, 1);
        std::exit(ActiveSimdLevel() == expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << "WEFT_SIMD=" << value;
}

TEST(DispatchTest, EnvironmentLowersTheLevel) {
  ExpectLevelUnderEnvironment("scalar", SimdLevel::kScalar);
  ExpectLevelUnderEnvironment("avx2", Lower(SimdLevel::kAvx2, BestLevel()));
  ExpectLevelUnderEnvironment("avx512", BestLevel());
  ExpectLevelUnderEnvironment("something-else", BestLevel());
}

}  // namespace
}  // namespace testing
}  // namespace weft
