// Every *_perf tool, run for real under weftrun, against the nccl-tests contract: exit status,
// exact results, table format, size/count/root/redop rules and bus-bandwidth factors.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
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

// What the spec's table says about each tool.
struct ToolSpec {
  const char* name;
  bool operator_column;  // redop shows the operator (else "none")
  bool rooted;
  bool total_size;  // size is the total over ranks; per-rank count rounded to 16 bytes
  double (*bus_factor)(int ranks);
  bool checks_in_place;
};

double TwiceRing(int n) { return 2.0 * (n - 1) / n; }
double Ring(int n) { return static_cast<double>(n - 1) / n; }
double One(int) { return 1; }

const ToolSpec kTools[] = {
    {"all_reduce", true, false, false, TwiceRing, true},
    {"reduce_scatter", true, false, true, Ring, true},
    {"all_gather", false, false, true, Ring, true},
    {"broadcast", false, true, false, One, true},
    {"reduce", true, true, false, One, true},
    {"alltoall", false, false, true, Ring, true},
    {"sendrecv", true, false, false, One, false},
    {"scatter", false, true, true, Ring, true},
    {"gather", false, true, true, Ring, true},
};

const ToolSpec& Spec(const std::string& name) {
  for (const ToolSpec& spec : kTools) {
    if (name == spec.name) return spec;
  }
  ADD_FAILURE() << "no spec for " << name;
  return kTools[0];
}

// Format-level checks every successful run must pass.
void ExpectWellFormed(const PerfOutput& out, const ProcessResult& result, int ranks,
                      const std::string& tool) {
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n") << "\n" << result.output;
  EXPECT_TRUE(out.other.empty()) << absl::StrJoin(out.other, "\n");
  EXPECT_EQ(out.program, tool + "_perf");
  EXPECT_TRUE(out.parameters_line);
  EXPECT_TRUE(out.result_header) << result.output;
  EXPECT_EQ(out.device_lines, ranks);
  std::vector<int> in_order;
  for (int r = 0; r < ranks; ++r) in_order.push_back(r);
  EXPECT_EQ(out.device_ranks, in_order);
  EXPECT_TRUE(out.concluded) << result.output;
  EXPECT_TRUE(out.ended) << result.output;
  // The average is the mean of every printed busbw (which are rounded to 0.01).
  double sum = 0;
  for (const PerfRow& row : out.rows) sum += row.half[0].busbw + row.half[1].busbw;
  ASSERT_TRUE(out.average_busbw.has_value());
  if (!out.rows.empty()) {
    EXPECT_NEAR(*out.average_busbw, sum / (2 * out.rows.size()), 0.006);
  }
}

class EveryTool : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(EveryTool, SmallSizesAreExactAndFormattedLikeNcclTests) {
  const auto& [ranks, name] = GetParam();
  const ToolSpec& spec = Spec(name);
  ProcessResult result =
      RunTool(name, ranks, {"-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"});
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  ExpectWellFormed(out, result, ranks, name);
  EXPECT_FALSE(out.error.has_value());
  EXPECT_EQ(out.out_of_bounds, 0);
  EXPECT_EQ(out.bandwidth_verdict, "");

  ASSERT_EQ(out.rows.size(), 5u) << result.output;  // 8, 64, 512, 4K, 32K
  size_t requested = 8;
  for (const PerfRow& row : out.rows) {
    SCOPED_TRACE(absl::StrCat("size ", requested));
    const int64_t elements = static_cast<int64_t>(requested / 4);
    if (spec.total_size) {
      const int64_t per_rank = elements / ranks / 4 * 4;  // 16 bytes of float
      EXPECT_EQ(row.count, per_rank);
      EXPECT_EQ(row.size, per_rank * ranks * 4);
    } else {
      EXPECT_EQ(row.count, elements);
      EXPECT_EQ(row.size, elements * 4);
    }
    EXPECT_EQ(row.type, "float");
    EXPECT_EQ(row.redop, spec.operator_column ? "sum" : "none");
    EXPECT_EQ(row.root, spec.rooted ? 0 : -1);
    for (int h = 0; h < 2; ++h) {
      const PerfHalf& half = row.half[h];
      if (h == 1 && !spec.checks_in_place) {
        EXPECT_FALSE(half.wrong.has_value()) << "in-place must be N/A";
      } else {
        EXPECT_EQ(half.wrong, 0);
      }
      EXPECT_GT(half.time_us, 0);
      // Both columns are rounded to 0.01.
      EXPECT_NEAR(half.busbw, half.algbw * spec.bus_factor(ranks), 0.011);
    }
    requested *= 8;
  }
}

std::string CaseName(const ::testing::TestParamInfo<EveryTool::ParamType>& info) {
  return absl::StrCat(std::get<1>(info.param), "_", std::get<0>(info.param), "ranks");
}

INSTANTIATE_TEST_SUITE_P(
    Perf, EveryTool,
    ::testing::Combine(::testing::Values(2, 3),
                       ::testing::Values<std::string>("all_reduce", "reduce_scatter", "all_gather",
                                                      "broadcast", "reduce", "alltoall", "sendrecv",
                                                      "scatter", "gather")),
    CaseName);

TEST(PerfTools, EveryTypeAndOperator) {
  ProcessResult result = RunTool(
      "all_reduce", 2, {"-b", "64", "-e", "64", "-n", "1", "-d", "all", "-o", "all", "-T", "60"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  ExpectWellFormed(out, result, 2, "all_reduce");
  std::set<std::pair<std::string, std::string>> seen;
  for (const PerfRow& row : out.rows) {
    seen.insert({row.type, row.redop});
    EXPECT_EQ(row.half[0].wrong, 0) << row.type << " " << row.redop;
    EXPECT_EQ(row.half[1].wrong, 0) << row.type << " " << row.redop;
  }
  EXPECT_EQ(out.rows.size(), 50u);
  EXPECT_EQ(seen.size(), 50u);  // 10 types x sum prod max min avg
  EXPECT_TRUE(seen.count({"bfloat16", "avg"}));
  EXPECT_TRUE(seen.count({"int8", "prod"}));
}

// -R 1 puts the buffers in weft::AllocShared memory, which the direct-read algorithm maps from
// its peers instead of reading it with process_vm_readv; 1 MiB spans several of its chunks.
TEST(PerfTools, SharedBuffersAreReadInPlaceExactly) {
  for (const char* tool : {"all_reduce", "reduce_scatter", "all_gather", "broadcast"}) {
    ProcessResult result = RunTool(tool, 3,
                                   {"-b", "1K", "-e", "1M", "-f", "32", "-n", "1", "-R", "1", "-A",
                                    "cma_direct", "-d", "all", "-T", "60"});
    // A forced cma_direct fails creation where ptrace forbids cross-memory attach.
    if (absl::StrContains(result.output,
                          "cross-memory attach between the ranks is not permitted")) {
      GTEST_SKIP() << "cross-memory attach is not permitted here: " << result.output;
    }
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const PerfOutput out = ParsePerfOutput(result.output);
    ExpectWellFormed(out, result, 3, tool);
    EXPECT_EQ(out.rows.size(), 30u) << result.output;  // 10 types x 3 sizes
    for (const PerfRow& row : out.rows) {
      EXPECT_EQ(row.half[0].wrong, 0) << tool << " " << row.type << " " << row.size;
      EXPECT_EQ(row.half[1].wrong, 0) << tool << " " << row.type << " " << row.size;
    }
  }
}

TEST(PerfTools, RootMinusOneRunsEveryRoot) {
  for (const char* tool : {"broadcast", "gather"}) {
    ProcessResult result =
        RunTool(tool, 3, {"-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-r", "-1"});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const PerfOutput out = ParsePerfOutput(result.output);
    ExpectWellFormed(out, result, 3, tool);
    std::vector<int> roots;
    for (const PerfRow& row : out.rows) {
      roots.push_back(row.root);
      EXPECT_EQ(row.half[0].wrong, 0);
      EXPECT_EQ(row.half[1].wrong, 0);
    }
    EXPECT_EQ(roots, (std::vector<int>{0, 0, 1, 1, 2, 2})) << tool;
  }
}

// Aggregation, blocking, misalignment, cycles, cputime, -a and repeated checks together, on a
// grouped point-to-point tool and on a collective.
TEST(PerfTools, FlagsCombine) {
  ProcessResult gather =
      RunTool("gather", 3,
              {"-b", "256", "-e", "1K", "-f", "2",  "-n", "3",  "-m", "3",  "-z", "1",  "-u",
               "1",  "-N",  "2",  "-C", "1",  "-a", "3",  "-c", "2",  "-r", "2",  "-d", "half"});
  ASSERT_EQ(gather.exit_code, 0) << gather.output;
  PerfOutput out = ParsePerfOutput(gather.output);
  ExpectWellFormed(out, gather, 3, "gather");
  EXPECT_TRUE(absl::StrContains(gather.output, "agg iters: 3 validation: 2 graph: 0 unalign: 1"));
  EXPECT_TRUE(absl::StrContains(
      gather.output,
      "# Blocking Enabled: wait for completion and barrier after each collective \n"));
  EXPECT_TRUE(absl::StrContains(gather.output, kResultHeaderCputime));
  EXPECT_EQ(out.rows.size(), 6u);  // 3 sizes x 2 cycles
  for (const PerfRow& row : out.rows) {
    EXPECT_EQ(row.type, "half");
    EXPECT_EQ(row.root, 2);
    EXPECT_EQ(row.half[0].wrong, 0);
    EXPECT_EQ(row.half[1].wrong, 0);
  }

  ProcessResult reduce =
      RunTool("reduce_scatter", 2, {"-b", "1K", "-e", "3K", "-i", "1K",  "-n", "4",     "-m", "2",
                                    "-z", "2",  "-a", "0",  "-o", "max", "-d", "int64", "-w", "0"});
  ASSERT_EQ(reduce.exit_code, 0) << reduce.output;
  out = ParsePerfOutput(reduce.output);
  ExpectWellFormed(out, reduce, 2, "reduce_scatter");
  EXPECT_TRUE(absl::StrContains(reduce.output, "step: 1024(bytes)"));
  EXPECT_TRUE(absl::StrContains(
      reduce.output,
      "# Blocking Enabled: wait for completion after each collective (no barrier) \n"));
  ASSERT_EQ(out.rows.size(), 3u);  // 1K, 2K, 3K
  EXPECT_EQ(out.rows[2].size, 3072);
  EXPECT_EQ(out.rows[2].redop, "max");
  for (const PerfRow& row : out.rows) EXPECT_EQ(row.half[1].wrong, 0);
}

// -J: one document, never overwriting an existing file; records carry exact bandwidths.
TEST(PerfTools, JsonReport) {
  if (RunProcess({"python3", "-c", "pass"}, {}, Scaled(std::chrono::seconds(20))).exit_code != 0) {
    FAIL() << "python3 is needed to parse the JSON (scripts/setup installs it)";
  }
  const std::string path = TempPath("report.json");
  { std::ofstream(path) << "keep"; }
  ProcessResult result =
      RunTool("alltoall", 3, {"-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-J", path});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "# Writing JSON output to " + path + ".0\n"));
  EXPECT_EQ(ReadFile(path), "keep");
  const char* kSummary = R"(
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
ratio = all(abs(x["busbw"] - x["algbw"] * 2 / 3) <= 1e-6 * max(1, x["busbw"]) for x in r)
print(d["version"], d["program"], d["config"]["ranks"], len(d["devices"]), len(r),
      sorted(set(x["placement"] for x in r)), sum(x["wrong"] for x in r), ratio,
      d["out_of_bounds"]["okay"], d["errors"], r[-1]["size"], r[-1]["count"])
)";
  ProcessResult summary =
      RunProcess({"python3", "-c", kSummary, path + ".0"}, {}, Scaled(std::chrono::seconds(20)));
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_EQ(summary.output,
            "1 alltoall_perf 3 3 6 ['in-place', 'out-of-place'] 0 True True [] 16368 1364\n");
}

// Under Open MPI's mpirun (Debian's), with the token passed by -x.
TEST(PerfTools, RunsUnderMpirun) {
  if (access("/usr/bin/mpirun", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/mpirun";
  ProcessResult result =
      RunProcess({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
                  "WEFT_TOKEN=perf-test-token", "-x", "WEFT_TIMEOUT=30", ToolPath("sendrecv"), "-b",
                  "8", "-e", "1K", "-f", "8", "-n", "2"},
                 {}, Scaled(std::chrono::seconds(60)));
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  EXPECT_EQ(out.device_lines, 2);
  EXPECT_EQ(out.rows.size(), 3u);  // 8, 64, 512
  for (const PerfRow& row : out.rows) EXPECT_EQ(row.half[0].wrong, 0);
}

TEST(PerfTools, UsageErrorsExitTwoBeforeStartingAnything) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"-x"},
                                             {"-b", "1M", "-e", "1K"},
                                             {"-o", "mulsum"},
                                             {"-d", "float8"},
                                             {"-z", "3"},
                                             {"-b", "12Q"},
                                             {"-V", "ring,ring"},
                                             {"-V", "auto,,ring"},
                                             {"-V", "all_reduce=ring"},
                                             {"-A", "ring", "-V", "auto,ring"},
                                             {"stray"}}) {
    std::vector<std::string> argv = {ToolPath("all_reduce")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ProcessResult result = RunProcess(argv, {}, Scaled(std::chrono::seconds(20)));
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(flags, " ") << "\n" << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, "USAGE:")) << result.output;
  }
  ProcessResult help = RunProcess({ToolPath("gather"), "-h"}, {}, Scaled(std::chrono::seconds(20)));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(help.output, "USAGE:"));

  // A root that is not a rank is found once the job's size is known.
  ProcessResult root = RunTool("broadcast", 2, {"-b", "8", "-e", "8", "-r", "5"});
  EXPECT_EQ(root.exit_code, 2) << root.output;
  EXPECT_TRUE(absl::StrContains(root.output, "# error: -r 5 is not a rank: the job has 2 ranks"))
      << root.output;
  // So is a variant the communicator does not know: its creation fails on every rank.
  ProcessResult variant = RunTool("all_reduce", 2, {"-b", "1K", "-e", "1K", "-V", "auto,bogus"});
  EXPECT_EQ(variant.exit_code, 2) << variant.output;
  EXPECT_TRUE(
      absl::StrContains(variant.output, "# error: variant bogus: unknown algorithm 'bogus'"))
      << variant.output;
}

}  // namespace
}  // namespace weft::testing
