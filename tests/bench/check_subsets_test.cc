// bench/check-subsets on reports written here with known samples: which subsets of runs and
// cycles put which cells over the bar, which cells cannot be judged, and clear refusals of files
// and sizes it cannot judge.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

// Three runs of two cycles, run after run as tuner-check records them.
// - all_reduce 8: the tuned variant as fast as shm_direct but in the third run, 1.3x there. The
//   whole check's median is 1.0; a subset of two runs with the third pairs 1.0, 1.0, 1.3, 1.3,
//   median 1.15.
// - all_reduce 64: 1.2x everywhere, over the bar in the whole check and in every subset.
// - all_reduce 512: the one forced variant lost a run's cycles, the tuned variant all_gather 8's
//   too: nothing pairs, neither is judged.
constexpr char kReport[] = R"({
 "config": {"repeats": 3, "cycles": 2, "bar": 1.1, "run_per_variant": false},
 "samples": [
  {"collective": "all_reduce", "size": 8, "variant": "tuned", "time_us": [1, 1, 1, 1, 1.3, 1.3]},
  {"collective": "all_reduce", "size": 8, "variant": "shm_direct", "time_us": [1, 1, 1, 1, 1, 1]},
  {"collective": "all_reduce", "size": 8, "variant": "cma_direct", "time_us": [2, 2, 2, 2, 2, 2]},
  {"collective": "all_reduce", "size": 64, "variant": "tuned", "time_us": [6, 6, 6, 6, 6, 6]},
  {"collective": "all_reduce", "size": 64, "variant": "ring", "time_us": [5, 5, 5, 5, 5, 5]},
  {"collective": "all_reduce", "size": 512, "variant": "tuned", "time_us": [1, 1, 1, 1, 1, 1]},
  {"collective": "all_reduce", "size": 512, "variant": "ring", "time_us": [1, 1, 1, 1]},
  {"collective": "all_gather", "size": 8, "variant": "tuned", "time_us": [9, 9, 9, 9]},
  {"collective": "all_gather", "size": 8, "variant": "ring", "time_us": [1, 1, 1, 1, 1, 1]}
 ]
})";

class CheckSubsets : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir_.path(), "/", name);
    std::ofstream(path) << text;
    return path;
  }
  static ProcessResult Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"python3",
                                     absl::StrCat(WEFT_SOURCE_DIR, "/bench/check-subsets")};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, {}, Scaled(std::chrono::seconds(30)));
  }
  void SetUp() override {
    if (RunProcess({"python3", "-c", "pass"}, {}, Scaled(std::chrono::seconds(20))).exit_code !=
        0) {
      FAIL() << "check-subsets needs python3 (scripts/setup installs it)";
    }
  }

 private:
  TempDir dir_{"check-subsets"};
};

TEST_F(CheckSubsets, CountsTheCellsEachSubsetPutsOverTheBar) {
  const std::string report = Write("report.json", kReport);
  const ProcessResult result = Run({report, "--runs", "2", "--cycles", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            absl::StrCat("# check-subsets: ", report,
                         ": 3 runs x 2 cycles, 2 cells judged paired, 2 left out with "
                         "nothing to pair, bar 1.1x\n"
                         "# the whole check: 1 of 2 within the bar; over: all_reduce 64\n"
                         "# 3 subsets of 2 runs x 2 cycles, cells over the bar: 1 in 1, 2 in 2 "
                         "(0 of 3 pass everywhere)\n"
                         "cell                     subsets over    worst\n"
                         "all_reduce 8                        2   1.150x\n"
                         "all_reduce 64                       3   1.200x\n"));
}

TEST_F(CheckSubsets, TakesEveryChoiceOfCycles) {
  // One run of one cycle each: six subsets, the third run's two over the bar at 1.3x.
  const ProcessResult result = Run({Write("report.json", kReport), "--runs", "1", "--cycles", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("# 6 subsets of 1 runs x 1 cycles, cells over the bar: 1 in 4, 2 in "
                               "2 (0 of 6 pass everywhere)\n"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("all_reduce 8                        2   1.300x\n"),
            std::string::npos)
      << result.output;
}

TEST_F(CheckSubsets, RefusesWhatItCannotJudge) {
  const std::string report = Write("report.json", kReport);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{report, "--runs", "4", "--cycles", "1"}, "--runs must be 1..3 and --cycles 1..2"},
      {{report, "--runs", "1", "--cycles", "0"}, "--runs must be 1..3 and --cycles 1..2"},
      {{Write("garbage.json", "{\"config\": "), "--runs", "1", "--cycles", "1"},
       "not a tuner-check --json report"},
      {{Write("no-samples.json", R"({"config": {"repeats": 1, "cycles": 1, "bar": 1.1}})"),
        "--runs", "1", "--cycles", "1"},
       "not a tuner-check --json report (no 'samples')"},
      {{Write("per-variant.json",
              R"({"config": {"repeats": 1, "cycles": 1, "bar": 1.1, "run_per_variant": true},
                  "samples": []})"),
        "--runs", "1", "--cycles", "1"},
       "nothing pairs"},
      {{Write("unpaired.json",
              R"({"config": {"repeats": 1, "cycles": 1, "bar": 1.1}, "samples": [
                  {"collective": "all_reduce", "size": 8, "variant": "tuned", "time_us": [1]}]})"),
        "--runs", "1", "--cycles", "1"},
       "no cell has the tuned and a forced variant"},
      {{absl::StrCat(report, ".missing"), "--runs", "1", "--cycles", "1"},
       "No such file or directory"},
  };
  for (const Case& c : cases) {
    const ProcessResult result = Run(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args[0] << ": " << result.output;
    EXPECT_NE(result.output.find(c.says), std::string::npos) << c.args[0] << ": " << result.output;
  }
}

}  // namespace
}  // namespace weft::testing
