// bench/tuner-check end to end on two tiny sizes: it must run the tuned and every applicable
// forced algorithm, leave out what cannot apply, calibrate into its own cache, and take each run
// cycle as a sample, whether the variants run side by side or one per run. Verdicts are timings
// and never asserted; that each judged size has one is, and that side by side it pairs the tuned
// variant's cycles with the forced ones' (one per run, nothing pairs: the pooled medians judge).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "perf_runner.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

// Per size: elements per call, a verdict, the tuner's pick, and every algorithm that implements
// the collective either measured or left out with a reason (cma_direct cannot run where ptrace is
// restricted). An 8 B reduce-scatter over 2 ranks is empty: nothing runs.
constexpr char kSummary[] = R"(
import json, sys
d = json.load(open(sys.argv[1]))
for name, rows in d["tables"].items():
    for r in rows:
        verdict = "judged" if r["verdict"] in ("ok", "SLOW") else r["verdict"]
        tuned = r["tuned"] in ("shm_direct", "cma_direct") if r["count"] else r["tuned"] is None
        print(name, r["size"], r["count"], verdict, tuned,
              sorted(set(r["forced"]) | set(r["excluded"])), r["best"] in r["forced"])
print(d["calibration"] != {}, set(d["calibration"]) <= set(d["cache_at_end"]), d["ranks"],
      d["failures"],
      sorted({len(s["time_us"]) for s in d["samples"]}))
judged = [r for rows in d["tables"].values() for r in rows if r["verdict"] in ("ok", "SLOW")]
print(d["config"]["judge"], sorted({r["paired"] is not None for r in judged}))
)";

constexpr char kExpected[] =
    "all_reduce 8 2 judged True ['cma_direct', 'hierarchical', 'rabenseifner', "
    "'recursive_doubling', 'ring', 'shm_direct'] True\n"
    "all_reduce 512 128 judged True ['cma_direct', 'hierarchical', 'rabenseifner', "
    "'recursive_doubling', 'ring', 'shm_direct'] True\n"
    "reduce_scatter 8 0 empty True [] False\n"
    "reduce_scatter 512 64 judged True ['cma_direct', 'hierarchical', 'rabenseifner', 'ring', "
    "'shm_direct'] True\n"
    "True True 2 [] [2]\n";
constexpr char kPaired[] = "paired [True]\n";
constexpr char kPooled[] = "pooled [False]\n";

// How the check runs its tools: one run per size or one over all sizes (--sweep); every variant
// side by side in each run (-V) or one run per variant (-A).
struct Mode {
  bool sweep;
  bool run_per_variant;
};

class TunerCheck : public ::testing::TestWithParam<Mode> {};

TEST_P(TunerCheck, ComparesTheTunedPickWithEveryForcedAlgorithm) {
  if (RunProcess({"python3", "-c", "pass"}, {}, Scaled(std::chrono::seconds(20))).exit_code != 0) {
    FAIL() << "tuner-check needs python3 (scripts/setup installs it)";
  }
  const std::string json = TempPath("tuner-check.json");
  // The first run calibrates the tuner (about a second here, many under a sanitizer).
  const int scale = TimeScale();
  std::vector<std::string> argv = {
      "python3",       absl::StrCat(WEFT_SOURCE_DIR, "/bench/tuner-check"),
      "--build",       WEFT_BUILD_DIR,
      "--min",         "8",
      "--max",         "512",
      "--factor",      "64",
      "--repeats",     "1",
      "--cycles",      "2",
      "--iters",       "5",
      "--timeout",     absl::StrCat(30 * scale),
      "--json",        json,
      "--collectives", "all_reduce,reduce_scatter"};
  if (GetParam().sweep) argv.push_back("--sweep");
  if (GetParam().run_per_variant) argv.push_back("--run-per-variant");
  // WEFT_ALGO in the caller's environment must not reach the runs, or the tuned column would show
  // the forced algorithm: hierarchical, which the tuner never picks on one host.
  ProcessResult result =
      RunProcess(argv, {{"WEFT_ALGO", "hierarchical"}}, std::chrono::seconds(100 * scale));
  ASSERT_FALSE(result.timed_out) << result.output;
  // 0: every size within the bar; 1: some size is not (timing, not asserted).
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 1) << result.output;
  ProcessResult summary =
      RunProcess({"python3", "-c", kSummary, json}, {}, Scaled(std::chrono::seconds(20)));
  ASSERT_EQ(summary.exit_code, 0) << summary.output << result.output;
  EXPECT_EQ(summary.output, absl::StrCat(kExpected, GetParam().run_per_variant ? kPooled : kPaired))
      << result.output;
}

INSTANTIATE_TEST_SUITE_P(
    Bench, TunerCheck, ::testing::Values(Mode{false, false}, Mode{true, false}, Mode{false, true}),
    [](const ::testing::TestParamInfo<Mode>& info) {
      return std::string(info.param.sweep ? "OneRunOverAllSizes" : "OneRunPerSize") +
             (info.param.run_per_variant ? "AndVariant" : "");
    });

}  // namespace
}  // namespace weft::testing
