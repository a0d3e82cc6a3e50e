// How the tools fail: wrong values, too little bandwidth, and runs that cannot finish (-T). Each
// failure must show in the output and in a non-zero exit status, and never hang.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "perf_output.h"
#include "perf_runner.h"
#include "rank_process.h"
#include "subprocess.h"

namespace weft::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// --inject_errors is the tools' documented way to prove the failure path: every checking rank
// flips a bit in the first N elements it received, before comparing.
TEST(PerfFailures, WrongValuesAreCountedAndFailTheRun) {
  const std::string json = TempPath("wrong.json");
  ProcessResult result =
      RunTool("broadcast", 3,
              {"-b", "64", "-e", "128", "-f", "2", "-n", "1", "--inject_errors", "2", "-J", json});
  EXPECT_EQ(result.exit_code, 7) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  ASSERT_EQ(out.rows.size(), 2u) << result.output;
  for (const PerfRow& row : out.rows) {
    EXPECT_EQ(row.half[0].wrong, 6);  // 2 elements on each of 3 ranks
    EXPECT_EQ(row.half[1].wrong, 6);
  }
  EXPECT_EQ(out.out_of_bounds, 12);  // checks in which a rank found wrong values
  EXPECT_TRUE(out.ended);
  EXPECT_TRUE(absl::StrContains(result.output, "Test failure: 24 wrong values")) << result.output;
  const std::string document = ReadFile(json);
  EXPECT_TRUE(absl::StrContains(document, "\"wrong\": 6}")) << document;
  EXPECT_TRUE(absl::StrContains(document, "\"out_of_bounds\": {\"count\": 12, \"okay\": false}"))
      << document;
}

TEST(PerfFailures, BandwidthBelowMinimumFailsTheRun) {
  ProcessResult slow = RunTool("all_reduce", 2, {"-b", "1K", "-e", "4K", "-f", "2", "-n", "2"},
                               {{"NCCL_TESTS_MIN_BW", "1e9"}});
  EXPECT_EQ(slow.exit_code, 7) << slow.output;
  PerfOutput out = ParsePerfOutput(slow.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  EXPECT_EQ(out.bandwidth_verdict, "FAILED");
  EXPECT_EQ(out.out_of_bounds, 0);
  EXPECT_TRUE(absl::StrContains(slow.output, "is below 0.9 x NCCL_TESTS_MIN_BW")) << slow.output;

  ProcessResult fine = RunTool("all_reduce", 2, {"-b", "1K", "-e", "4K", "-f", "2", "-n", "2"},
                               {{"NCCL_TESTS_MIN_BW", "1e-9"}});
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
  EXPECT_EQ(ParsePerfOutput(fine.output).bandwidth_verdict, "OK");
}

// Torchrun's variables for rank `rank` of `ranks`, rendezvous on `port`.
Env Torchrun(int rank, int ranks, int port) {
  return {{"RANK", std::to_string(rank)},      {"WORLD_SIZE", std::to_string(ranks)},
          {"MASTER_ADDR", "127.0.0.1"},        {"MASTER_PORT", std::to_string(port)},
          {"WEFT_TOKEN", "perf-failure-test"}, {"WEFT_TIMEOUT", "30"}};
}

// Two ranks started with torchrun's variables run to completion.
TEST(PerfFailures, RunsUnderTorchrunVariables) {
  const int port = FreePort();
  const std::vector<std::string> argv = {
      ToolPath("reduce"), "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-r", "1"};
  RankProcess r1 =
      StartRank(argv, Torchrun(1, 2, port), TempPath("rank1.txt"), Scaled(seconds(60)));
  RankProcess r0 =
      StartRank(argv, Torchrun(0, 2, port), TempPath("rank0.txt"), Scaled(seconds(60)));
  EXPECT_EQ(WaitExit(r0.pid, Scaled(seconds(60))), 0) << ReadFile(r0.output_path);
  EXPECT_EQ(WaitExit(r1.pid, Scaled(seconds(60))), 0) << ReadFile(r1.output_path);
  const PerfOutput out = ParsePerfOutput(ReadFile(r0.output_path));
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  EXPECT_EQ(out.rows.size(), 2u);
  EXPECT_EQ(ReadFile(r1.output_path), "");  // only rank 0 prints
}

// A peer that never starts: creation waits for it, and -T ends the wait.
TEST(PerfFailures, TimeoutEndsAWaitForAMissingPeer) {
  const RankProcess r0 =
      StartRank({ToolPath("all_reduce"), "-b", "8", "-e", "8", "-T", "2"},
                Torchrun(0, 2, FreePort()), TempPath("alone.txt"), Scaled(seconds(30)));
  const Clock::time_point start = Clock::now();
  const std::optional<int> status = WaitExit(r0.pid, Scaled(seconds(20)));
  if (!status) kill(r0.pid, SIGKILL);
  ASSERT_EQ(status, 4) << ReadFile(r0.output_path);
  EXPECT_LT(Clock::now() - start, Scaled(seconds(8)));
  EXPECT_TRUE(absl::StrContains(ReadFile(r0.output_path), "# error: the run exceeded -T 2 s"))
      << ReadFile(r0.output_path);
}

// A peer that stops mid-run (SIGSTOP): the other rank's collective can never finish; -T aborts
// it, and the table ends with the footer and the error.
TEST(PerfFailures, TimeoutEndsARunWhosePeerStalls) {
  const int port = FreePort();
  const std::vector<std::string> argv = {
      ToolPath("all_reduce"), "-b", "64K", "-e", "64K", "-n", "100000000", "-T", "4"};
  RankProcess r1 =
      StartRank(argv, Torchrun(1, 2, port), TempPath("stalled1.txt"), Scaled(seconds(60)));
  RankProcess r0 =
      StartRank(argv, Torchrun(0, 2, port), TempPath("stalled0.txt"), Scaled(seconds(60)));
  const bool table_started = WaitForText(r0.output_path, kResultHeader[2], Scaled(seconds(20)));
  kill(r1.pid, SIGSTOP);
  const std::optional<int> status = WaitExit(r0.pid, Scaled(seconds(20)));
  kill(r1.pid, SIGKILL);
  WaitExit(r1.pid, Scaled(seconds(20)));
  if (!status) kill(r0.pid, SIGKILL);
  const std::string output = ReadFile(r0.output_path);
  ASSERT_EQ(status, 4) << output;
  EXPECT_TRUE(absl::StrContains(output, "# error: the run exceeded -T 4 s")) << output;
  if (table_started) {
    const PerfOutput out = ParsePerfOutput(output);
    EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
    EXPECT_TRUE(out.concluded) << output;
    ASSERT_TRUE(out.error.has_value());
    EXPECT_TRUE(absl::StartsWith(*out.error, "the run exceeded -T 4 s")) << *out.error;
  }
}

}  // namespace
}  // namespace weft::testing
