// The compressed all-reduce and reduce-scatter over real processes: weftrun starts
// compressed_worker on 2, 3, 4 and 8 ranks over shared memory and on 2 and 3 over TCP; each rank
// checks its results against the documented computation (compressed_worker.cc).
#include <fstream>
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
                                           Case{8, "shm"}, Case{2, "tcp"}, Case{3, "tcp"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.transport) + "_" +
                                  std::to_string(info.param.ranks);
                         });

// Over two pretend nodes of two ranks (TCP between them) the reduce-scatter's path is the cost
// model's: with a tuning file whose lone flow is no faster than every rank sending at once, the
// direct all-to-all; with the built-in defaults, whose lone flow is 1.4 times faster, the ring.
// The forced paths give their documented results there too.
TEST(CompressedReduceScatterPath, TheCostModelChoosesTheRingWhenALoneFlowIsFaster) {
  const std::string file = ::testing::TempDir() + "/compressed_direct.tuning";
  {
    std::ofstream out(file);
    out << "net.alpha_us 40\nnet.gbps 1\nnet_flow.alpha_us 40\nnet_flow.gbps 1\n";
  }
  for (const bool defaults : {false, true}) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"WEFT_TIMEOUT", std::to_string(30 * TimeScale())},
        {"WEFT_FAKE_HOSTS", "a a b b"},
        {"WEFT_SOCKET_IFNAME", "lo"},
        {"WEFT_EXPECT_COMPRESSED_RING", defaults ? "1" : "0"}};
    if (!defaults) env.emplace_back("WEFT_TUNING_FILE", file);
    const ProcessResult result =
        RunProcess({WEFTRUN, "-n", "4", "--timeout", std::to_string(60 * TimeScale()), "--",
                    WITH_HOST, COMPRESSED_WORKER},
                   env, Scaled(std::chrono::seconds(70)));
    EXPECT_FALSE(result.timed_out);
    EXPECT_EQ(result.exit_code, 0) << (defaults ? "defaults: " : "flat file: ") << result.output;
  }
}

}  // namespace
}  // namespace weft::testing
