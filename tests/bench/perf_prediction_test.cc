// -P 1: the tools print, after nccl-tests' columns, the algorithm that ran, the tuner's predicted
// time and measured/predicted; run for real under weftrun and read back like a user's script.
// The numbers' values are timings and never asserted; their relations are.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "perf_output.h"
#include "perf_runner.h"
#include "rank_process.h"
#include "subprocess.h"

namespace weft::testing {
namespace {

const std::set<std::string> kAlgorithms = {"ring",       "rabenseifner", "recursive_doubling",
                                           "shm_direct", "cma_direct",   "tree",
                                           "pairwise",   "hierarchical"};

// Half a unit in the last printed digit: how far the printed text may be from the value.
double Rounding(const std::string& text) {
  const size_t dot = text.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
  return 0.5 * std::pow(10.0, -decimals);
}

double Value(const std::string& text) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << text;
  return value;
}

PerfOutput RunPredicted(const std::string& tool, std::vector<std::string> flags,
                        std::string* output) {
  flags.insert(flags.end(), {"-P", "1"});
  ProcessResult result = RunTool(tool, 2, flags);
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  *output = result.output;
  PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n") << "\n" << result.output;
  EXPECT_TRUE(out.predicted_header) << result.output;
  EXPECT_TRUE(out.concluded) << result.output;
  EXPECT_EQ(out.out_of_bounds, 0);
  for (const PerfRow& row : out.rows) EXPECT_TRUE(row.prediction.has_value()) << result.output;
  return out;
}

// Every ratio is the row's measured time over its predicted time, up to the printed rounding.
void ExpectRatiosMatchTimes(const PerfRow& row) {
  const PerfPrediction& p = *row.prediction;
  ASSERT_NE(p.predicted_us, "N/A") << row.size;
  const double predicted = Value(p.predicted_us);
  const double dp = Rounding(p.predicted_us);
  ASSERT_GT(predicted, dp) << "a prediction must be a positive time";
  for (int h = 0; h < 2; ++h) {
    const double time = row.half[h].time_us;
    const double dt = 0.005 * (time < 1e4 ? 1 : 10);  // "%.2f", or "%.1f" from 10000 us
    const double ratio = Value(p.ratio[h]);
    const double dr = Rounding(p.ratio[h]);
    EXPECT_GE(ratio + dr, (time - dt) / (predicted + dp)) << row.size << " half " << h;
    EXPECT_LE(ratio - dr, (time + dt) / (predicted - dp)) << row.size << " half " << h;
  }
}

TEST(PerfPredicted, TunedRowsNameTheAlgorithmAndPredictTheirTime) {
  std::string output;
  const PerfOutput out = RunPredicted(
      "all_reduce", {"-b", "8", "-e", "1M", "-f", "16", "-n", "3", "-w", "1"}, &output);
  ASSERT_EQ(out.rows.size(), 5u) << output;  // 8, 128, 2K, 32K, 512K
  for (const PerfRow& row : out.rows) {
    SCOPED_TRACE(row.size);
    EXPECT_TRUE(kAlgorithms.count(row.prediction->algorithm)) << row.prediction->algorithm;
    EXPECT_EQ(row.half[0].wrong, 0);
    ExpectRatiosMatchTimes(row);
  }
}

TEST(PerfPredicted, AForcedAlgorithmIsTheOneShownWhereItImplementsTheCollective) {
  std::string output;
  PerfOutput out = RunPredicted(
      "all_reduce", {"-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-A", "ring"}, &output);
  ASSERT_EQ(out.rows.size(), 2u) << output;
  for (const PerfRow& row : out.rows) {
    EXPECT_EQ(row.prediction->algorithm, "ring") << output;
    ExpectRatiosMatchTimes(row);
  }
  // The binomial tree has no all-reduce: the tuner chooses, and the column says what it chose.
  out = RunPredicted("all_reduce", {"-b", "1K", "-e", "1K", "-n", "2", "-A", "tree"}, &output);
  ASSERT_EQ(out.rows.size(), 1u) << output;
  EXPECT_NE(out.rows[0].prediction->algorithm, "tree");
  EXPECT_TRUE(kAlgorithms.count(out.rows[0].prediction->algorithm)) << output;
}

TEST(PerfPredicted, PointToPointAndEmptySizesHaveNoPrediction) {
  std::string output;
  PerfOutput out = RunPredicted("gather", {"-b", "1K", "-e", "1K", "-n", "2"}, &output);
  ASSERT_EQ(out.rows.size(), 1u) << output;
  EXPECT_EQ(out.rows[0].prediction->algorithm, "p2p");
  EXPECT_EQ(out.rows[0].prediction->predicted_us, "N/A");
  EXPECT_EQ(out.rows[0].prediction->ratio[0], "N/A");
  EXPECT_EQ(out.rows[0].prediction->ratio[1], "N/A");

  // 8 B over 2 ranks rounds each rank's block down to nothing: no operation runs.
  out = RunPredicted("reduce_scatter", {"-b", "8", "-e", "64", "-f", "8", "-n", "2"}, &output);
  ASSERT_EQ(out.rows.size(), 2u) << output;
  EXPECT_EQ(out.rows[0].count, 0);
  EXPECT_EQ(out.rows[0].prediction->algorithm, "none");
  EXPECT_EQ(out.rows[0].prediction->predicted_us, "N/A");
  EXPECT_TRUE(kAlgorithms.count(out.rows[1].prediction->algorithm)) << output;
}

// Without -P the table is nccl-tests' own: no -P header and rows of exactly 118 characters
// (ParsePerfOutput reports any other width as a problem).
TEST(PerfPredicted, OffByDefault) {
  ProcessResult result = RunTool("broadcast", 2, {"-b", "1K", "-e", "4K", "-f", "4", "-n", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  EXPECT_TRUE(out.result_header);
  EXPECT_FALSE(out.predicted_header);
  ASSERT_EQ(out.rows.size(), 2u);
  for (const PerfRow& row : out.rows) EXPECT_FALSE(row.prediction.has_value());
}

// -J carries the -P columns unrounded; without -P the records have no such keys.
TEST(PerfPredicted, JsonRecordsCarryThePrediction) {
  if (RunProcess({"python3", "-c", "pass"}, {}, Scaled(std::chrono::seconds(20))).exit_code != 0) {
    FAIL() << "python3 is needed to parse the JSON (scripts/setup installs it)";
  }
  const char* kSummary = R"(
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
keys = ("algorithm", "predicted_us", "measured_over_predicted")
if d["config"]["predicted"]:
    exact = all(x["predicted_us"] > 0 and
                abs(x["measured_over_predicted"] - x["time_us"] / x["predicted_us"])
                <= 1e-6 * x["measured_over_predicted"] for x in r)
    print(len(r), sorted(set(x["algorithm"] for x in r)), exact)
else:
    print(len(r), any(k in x for x in r for k in keys))
)";
  for (const bool predicted : {true, false}) {
    const std::string path = TempPath("predicted.json");
    std::vector<std::string> flags = {"-b", "4K", "-e", "16K",  "-f", "4",
                                      "-n", "2",  "-A", "ring", "-J", path};
    if (predicted) flags.insert(flags.end(), {"-P", "1"});
    ProcessResult result = RunTool("all_gather", 2, flags);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    ProcessResult summary =
        RunProcess({"python3", "-c", kSummary, path}, {}, Scaled(std::chrono::seconds(20)));
    ASSERT_EQ(summary.exit_code, 0) << summary.output;
    EXPECT_EQ(summary.output, predicted ? "4 ['ring'] True\n" : "4 False\n");
  }
}

}  // namespace
}  // namespace weft::testing
