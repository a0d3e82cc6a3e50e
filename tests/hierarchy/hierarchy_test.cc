// Hierarchical collectives and the tuner across pretend nodes: real processes started by weftrun,
// each rank given a host identity by with_host.sh, so ranks of one "node" share memory and ranks
// of different ones talk TCP over loopback.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Runs `program args` on one rank per word of `hosts` ("a a b b": 2 nodes x 2 ranks).
ProcessResult RunJob(const std::string& hosts, std::vector<std::string> program, Env extra) {
  const int limit_s = 120 * TimeScale();
  const int ranks = static_cast<int>(
      std::vector<std::string>(absl::StrSplit(hosts, ' ', absl::SkipEmpty())).size());
  std::vector<std::string> argv = {
      WEFTRUN, "-n", std::to_string(ranks), "--timeout", std::to_string(limit_s), "--", WITH_HOST};
  argv.insert(argv.end(), program.begin(), program.end());
  Env env = {{"WEFT_FAKE_HOSTS", hosts},
             {"WEFT_SOCKET_IFNAME", "lo"},
             {"WEFT_TIMEOUT", std::to_string(60 * TimeScale())}};
  env.insert(env.end(), extra.begin(), extra.end());
  return RunProcess(argv, env, std::chrono::seconds(limit_s + 10));
}

void ExpectSuccess(const ProcessResult& result) {
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// (hosts, WEFT_ALGO, WEFT_TRANSPORT)
class HierarchicalCollectives
    : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(HierarchicalCollectives, EveryTypeOpAndPlacementIsExact) {
  const auto& [hosts, algorithm, transport] = GetParam();
  Env env = {{"WEFT_TRANSPORT", transport}};
  if (!algorithm.empty()) env.emplace_back("WEFT_ALGO", algorithm);
  ExpectSuccess(RunJob(hosts, {COMM_WORKER, "collectives"}, env));
}

// Ranks that pretend to be on different hosts share this machine's cores all the same (the rig's
// network namespaces, containers): pinned to one core each, they must see themselves
// oversubscribed, or they spin and yield where they should sleep.
TEST(Oversubscription, RanksOfPretendHostsCountAgainstTheCores) {
  ExpectSuccess(RunJob("a b", {COMM_WORKER, "oversubscribed"}, {}));
  ExpectSuccess(RunJob("a a b b", {COMM_WORKER, "oversubscribed"}, {}));
}

std::string CaseName(const ::testing::TestParamInfo<HierarchicalCollectives::ParamType>& info) {
  const auto& [hosts, algorithm, transport] = info.param;
  return absl::StrCat(absl::StrReplaceAll(hosts, {{" ", ""}}), "_",
                      algorithm.empty() ? "tuned" : algorithm, "_", transport);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HierarchicalCollectives,
    ::testing::Values(
        // 2 nodes x 2 ranks, nodes contiguous and interleaved.
        std::make_tuple("a a b b", "hierarchical", "auto"),
        std::make_tuple("a b a b", "hier", "auto"),
        // Uneven: the lone rank's node has one lane; the larger node's extra ranks go through it.
        std::make_tuple("a a a b", "hierarchical", "auto"),
        std::make_tuple("b a b b", "hierarchical", "auto"),
        // Three nodes of different sizes, and every link over TCP.
        std::make_tuple("a b c b c", "hierarchical", "auto"),
        std::make_tuple("a a b b", "hierarchical", "tcp"),
        // Whatever the tuner picks on 2 x 2 must be exact too.
        std::make_tuple("a a b b", "", "auto"),
        // Rabenseifner over nodes takes the low bits first on bit-reversed blocks; over
        // interleaved nodes its first steps cross, and 3 ranks fold instead.
        std::make_tuple("a a b b", "rabenseifner", "auto"),
        std::make_tuple("a b a b", "rabenseifner", "auto"),
        std::make_tuple("a a b", "rabenseifner", "auto")),
    CaseName);

TEST(Tuner, AllRanksChooseAlikeAcrossNodes) {
  ProcessResult result = RunJob("a a b b", {TUNER_WORKER}, {});
  ExpectSuccess(result);
  EXPECT_TRUE(absl::StrContains(result.output, "2 nodes")) << result.output;
}

TEST(Tuner, AllRanksChooseAlikeOnOneHost) { ExpectSuccess(RunJob("a a a", {TUNER_WORKER}, {})); }

// Across nodes weft-tune measures the shm class inside each node and the net class across them
// (every lane at once, and the first lane alone: net_flow), and a job across those nodes prices
// with its file.
TEST(Tuner, WeftTuneMeasuresTheLinksAcrossNodes) {
  const std::string file = ::testing::TempDir() + "/hierarchy-test-tuning.txt";
  ExpectSuccess(RunJob("a a b b", {WEFT_TUNE, "--out", file, "--samples", "2"}, {}));
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), "\nnet.2.gbps ")) << text.str();
  EXPECT_TRUE(absl::StrContains(text.str(), "\nnet_flow.2.gbps ")) << text.str();
  EXPECT_TRUE(absl::StrContains(text.str(), "\nshm.2.gbps ")) << text.str();
  const ProcessResult used =
      RunJob("a a b b", {TUNER_WORKER}, {{"WEFT_TUNING_FILE", file}, {"WEFT_DEBUG", "INFO"}});
  ExpectSuccess(used);
  EXPECT_TRUE(absl::StrContains(used.output, "tuner model: " + file)) << used.output;
  std::remove(file.c_str());
}

TEST(Tuner, WeftAlgoOverridesTheTuner) {
  ExpectSuccess(RunJob("a a a b", {TUNER_WORKER},
                       {{"WEFT_ALGO", "all_reduce=ring"}, {"WEFT_EXPECT_ALGO", "ring"}}));
  ExpectSuccess(RunJob("a a b b", {TUNER_WORKER},
                       {{"WEFT_ALGO", "hier"}, {"WEFT_EXPECT_ALGO", "hierarchical"}}));
}

TEST(Tuner, DebugInfoPrintsEachDecisionOnceWithItsPrediction) {
  ProcessResult result = RunJob("a a b b", {TUNER_WORKER}, {{"WEFT_DEBUG", "INFO"}});
  ExpectSuccess(result);
  // tuner_worker asks for 6 collectives at 13 sizes, each a different power-of-two class, several
  // times each (AlgorithmFor, PredictedSeconds, ExplainAlgorithm): one line per pair, from rank 0.
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    if (!absl::StrContains(line, "tuner: ")) continue;
    ++lines;
    EXPECT_TRUE(absl::StrContains(line, "rank 0:")) << line;
    EXPECT_TRUE(absl::StrContains(line, " predicted ")) << line;
  }
  EXPECT_EQ(lines, 6 * 13) << result.output;
}

}  // namespace
}  // namespace weft::testing
