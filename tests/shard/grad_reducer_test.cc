// The data-parallel reducers over real processes: weftrun starts grad_reducer_worker (GradReducer)
// on 1 to 4 ranks (shared memory) and on 2 ranks over TCP, and zero_wire_worker (ZeroReducer's
// wire types) on 2 and 4 ranks and on 2 over TCP.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

ProcessResult RunWorker(const char* worker, int ranks,
                        std::vector<std::pair<std::string, std::string>> env) {
  env.emplace_back("WEFT_TIMEOUT", std::to_string(30 * TimeScale()));
  return RunProcess({WEFTRUN, "-n", std::to_string(ranks), "--timeout",
                     std::to_string(60 * TimeScale()), "--", worker},
                    env, Scaled(std::chrono::seconds(70)));
}

const std::vector<std::pair<std::string, std::string>> kTcp = {{"WEFT_TRANSPORT", "tcp"},
                                                               {"WEFT_SOCKET_IFNAME", "lo"}};

class GradReducerRanks : public ::testing::TestWithParam<int> {};

TEST_P(GradReducerRanks, BucketsAverageExactlyAndReportMisuse) {
  const ProcessResult result = RunWorker(REDUCER_WORKER, GetParam(), {});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Shm, GradReducerRanks, ::testing::Values(1, 2, 3, 4));

TEST(GradReducerTcp, TwoRanks) {
  const ProcessResult result = RunWorker(REDUCER_WORKER, 2, kTcp);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// ZeRO stages 1-3, flat and hybrid, with fp32, fp16 and bf16 wires.
class ZeroWireRanks : public ::testing::TestWithParam<int> {};

TEST_P(ZeroWireRanks, SlicesAverageAsDocumentedAndMisuseIsRefused) {
  const ProcessResult result = RunWorker(ZERO_WIRE_WORKER, GetParam(), {});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Shm, ZeroWireRanks, ::testing::Values(2, 4));

TEST(ZeroWireTcp, TwoRanks) {
  const ProcessResult result = RunWorker(ZERO_WIRE_WORKER, 2, kTcp);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace weft::testing
