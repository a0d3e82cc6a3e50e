// The compressed all-reduce over real processes: weftrun starts compressed_worker on 2, 3 and 4
// ranks over shared memory and on 2 and 3 over TCP; each rank checks its results against the
// documented computation (compressed_worker.cc).
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

struct Case {
  int ranks;
  const char* transport;
};

class CompressedAllReduceRanks : public ::testing::TestWithParam<Case> {};

TEST_P(CompressedAllReduceRanks, EveryCodecGivesItsDocumentedResult) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"WEFT_TIMEOUT", std::to_string(30 * TimeScale())}, {"WEFT_TRANSPORT", GetParam().transport}};
  if (std::string(GetParam().transport) == "tcp") env.emplace_back("WEFT_SOCKET_IFNAME", "lo");
  const ProcessResult result =
      RunProcess({WEFTRUN, "-n", std::to_string(GetParam().ranks), "--timeout",
                  std::to_string(60 * TimeScale()), "--", COMPRESSED_WORKER},
                 env, Scaled(std::chrono::seconds(70)));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CompressedAllReduceRanks,
                         ::testing::Values(Case{2, "shm"}, Case{3, "shm"}, Case{4, "shm"},
                                           Case{2, "tcp"}, Case{3, "tcp"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.transport) + "_" +
                                  std::to_string(info.param.ranks);
                         });

}  // namespace
}  // namespace weft::testing
