// GradReducer over real processes: weftrun starts grad_reducer_worker on 1 to 4 ranks (shared
// memory) and on 2 ranks over TCP.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

ProcessResult RunWorker(int ranks, std::vector<std::pair<std::string, std::string>> env) {
  env.emplace_back("WEFT_TIMEOUT", std::to_string(30 * TimeScale()));
  return RunProcess({WEFTRUN, "-n", std::to_string(ranks), "--timeout",
                     std::to_string(60 * TimeScale()), "--", REDUCER_WORKER},
                    env, Scaled(std::chrono::seconds(70)));
}

class GradReducerRanks : public ::testing::TestWithParam<int> {};

TEST_P(GradReducerRanks, BucketsAverageExactlyAndReportMisuse) {
  const ProcessResult result = RunWorker(GetParam(), {});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Shm, GradReducerRanks, ::testing::Values(1, 2, 3, 4));

TEST(GradReducerTcp, TwoRanks) {
  const ProcessResult result =
      RunWorker(2, {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_SOCKET_IFNAME", "lo"}});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace weft::testing
