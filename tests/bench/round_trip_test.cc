// cache_line_round_trip, run for real: a round trip per pair and the largest, a pair on one CPU
// refused, and a CPU the process may not use reported instead of waited on.
#include <sched.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace weft {
namespace {

using testing::ProcessResult;
using testing::RunProcess;

constexpr auto kLimit = std::chrono::seconds(60);

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// The number after the last "round_trip_ns" in `output`, or -1.
double LargestRoundTrip(const std::string& output) {
  const size_t at = output.rfind("largest round_trip_ns ");
  double ns = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtod(output.substr(at + 22, output.find('\n', at) - at - 22), &ns)) {
    return -1;
  }
  return ns;
}

TEST(CacheLineRoundTrip, MeasuresEveryPairAndPrintsTheLargest) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "this process may run on one CPU only";
  const std::string pair = absl::StrCat(cpus[0], ",", cpus[1]);
  const ProcessResult run = RunProcess({ROUND_TRIP, "-c", pair, "-n", "20000"}, {}, kLimit);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("cpus ", pair, " round_trip_ns ")))
      << run.output;
  // A round trip moves two cache lines between cores: more than a nanosecond, well under a
  // millisecond even on a loaded machine.
  const double ns = LargestRoundTrip(run.output);
  EXPECT_GT(ns, 1) << run.output;
  EXPECT_LT(ns, 1e6) << run.output;
}

TEST(CacheLineRoundTrip, RefusesAPairOnOneCpu) {
  const ProcessResult run = RunProcess({ROUND_TRIP, "-c", "0,0"}, {}, kLimit);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "distinct")) << run.output;
}

TEST(CacheLineRoundTrip, ACpuItMayNotUseIsAnErrorNotAHang) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.empty()) GTEST_SKIP() << "no CPU list";
  // One past the last allowed CPU, which this process may not run on.
  const std::string pair = absl::StrCat(cpus[0], ",", cpus.back() + 1);
  const ProcessResult run = RunProcess({ROUND_TRIP, "-c", pair}, {}, kLimit);
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "is each CPU allowed")) << run.output;
}

}  // namespace
}  // namespace weft
