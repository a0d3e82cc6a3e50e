// The tuner's picks are deterministic and creation writes nothing: real jobs started by weftrun.
// pick_worker checks that every rank and every call of a job ran a collective on the same
// algorithm; two runs must pick alike; weft-tune's file is the model a job then names; a job and
// the collectives suite leave nothing under HOME.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

ProcessResult Launch(int ranks, std::vector<std::string> program, Env env) {
  const int limit_s = 120 * TimeScale();
  std::vector<std::string> argv = {
      WEFTRUN, "-n", std::to_string(ranks), "--timeout", std::to_string(limit_s), "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  env.emplace_back("WEFT_TIMEOUT", std::to_string(60 * TimeScale()));
  return RunProcess(argv, env, std::chrono::seconds(limit_s + 10));
}

// pick_worker's report: rank 0's "pick COLLECTIVE BYTES ALGORITHM" lines.
std::string PickLines(const std::string& output) {
  std::string picks;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, "pick ")) absl::StrAppend(&picks, line, "\n");
  }
  return picks;
}

ProcessResult RunPicks(int ranks, Env env) {
  const TempDir dumps("determinism-test");
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dumps.path());
  env.emplace_back("WEFT_FLIGHT_RECORDER_SIZE", "4096");
  return Launch(ranks, {PICK_WORKER}, std::move(env));
}

void ExpectSuccess(const ProcessResult& result) {
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

class Picks : public ::testing::TestWithParam<std::pair<int, std::string>> {};

TEST_P(Picks, AreTheSameOnEveryRankEveryCallAndEveryRun) {
  const auto& [ranks, transport] = GetParam();
  const Env env = {{"WEFT_TRANSPORT", transport}};
  const ProcessResult first = RunPicks(ranks, env);
  ExpectSuccess(first);
  const ProcessResult second = RunPicks(ranks, env);
  ExpectSuccess(second);
  EXPECT_FALSE(PickLines(first.output).empty()) << first.output;
  EXPECT_EQ(PickLines(first.output), PickLines(second.output));
}

INSTANTIATE_TEST_SUITE_P(Layouts, Picks,
                         ::testing::Values(std::pair(2, "auto"), std::pair(3, "auto"),
                                           std::pair(4, "tcp")),
                         [](const auto& info) {
                           return absl::StrCat(info.param.first, "ranks_", info.param.second);
                         });

TEST(TuningFile, WeftTuneWritesTheModelAJobThenUses) {
  const TempDir dir("determinism-test");
  const std::string file = dir.path() + "/tuning.txt";
  const ProcessResult tuned = Launch(2, {WEFT_TUNE, "--out", file, "--samples", "2"}, {});
  ExpectSuccess(tuned);
  ASSERT_TRUE(std::filesystem::exists(file)) << tuned.output;
  const ProcessResult used = RunPicks(2, {{"WEFT_TUNING_FILE", file}, {"WEFT_DEBUG", "INFO"}});
  ExpectSuccess(used);
  EXPECT_TRUE(absl::StrContains(used.output, "tuner model: " + file)) << used.output;
  EXPECT_TRUE(absl::StrContains(used.output, "; model: " + file + ")")) << used.output;
}

TEST(TuningFile, AMissingOrBrokenFileFailsCreationNamingIt) {
  const TempDir dir("determinism-test");
  const std::string missing = dir.path() + "/none.txt";
  const ProcessResult result = RunPicks(2, {{"WEFT_TUNING_FILE", missing}});
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "WEFT_TUNING_FILE " + missing)) << result.output;
  const std::string broken = dir.path() + "/broken.txt";
  ASSERT_EQ(RunProcess({"/bin/sh", "-c", "echo 'shm.gbps fast' > " + broken}, {},
                       std::chrono::seconds(10))
                .exit_code,
            0);
  const ProcessResult parsed = RunPicks(2, {{"WEFT_TUNING_FILE", broken}});
  EXPECT_NE(parsed.exit_code, 0) << parsed.output;
  EXPECT_TRUE(absl::StrContains(parsed.output, broken + ":1: 'shm.gbps fast'")) << parsed.output;
}

// The picks depend on CommOptions::shared_buffers: ranks that disagree fail creation, naming it.
TEST(TuningFile, RanksThatDisagreeOnSharedBuffersFailCreation) {
  const ProcessResult result = Launch(
      2,
      {"/bin/sh", "-c",
       absl::StrCat("[ \"$WEFT_RANK\" = 1 ] && export WEFT_SHARED_BUFFERS=1; exec ", PICK_WORKER)},
      {});
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "every rank must say the same")) << result.output;
}

// Creation calibrates nothing and caches nothing: HOME stays empty.
TEST(Home, CreationAndTheCollectivesSuiteWriteNothingThere) {
  const TempDir home("determinism-test");
  const Env env = {{"HOME", home.path()}, {"XDG_CACHE_HOME", home.path() + "/.cache"}};
  ExpectSuccess(RunPicks(2, env));
  ExpectSuccess(Launch(2, {COMM_WORKER, "collectives"}, env));
  EXPECT_TRUE(std::filesystem::is_empty(home.path()))
      << std::filesystem::directory_iterator(home.path())->path();
}

}  // namespace
}  // namespace weft::testing
