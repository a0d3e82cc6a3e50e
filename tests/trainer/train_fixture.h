// The fixture of the weft-train end-to-end tests: runs weft-train (under weftrun) on a corpus it
// writes, and reads back metrics.jsonl and checkpoints; and the comparisons the tests share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"
#include "weft/shard/checkpoint.h"

namespace weft::testing {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr double kDataParallelRelTol = 1e-5;

// How close a layout must follow one rank: every step's loss and gradient norm (relative), each
// tensor's parameters after the run (relative norm), and the noise bound of ExpectSameParams.
struct Tolerance {
  double metrics = kDataParallelRelTol;
  double params = kDataParallelRelTol;
  double noise = 1e-4;
};

// A tensor of a checkpoint, whole.
struct SavedTensor {
  shard::TensorInfo info;
  std::vector<float> values;
};

// One parallel layout of the same job: ranks, gradient accumulation, ZeRO stage, transport, and
// more settings (comma-separated key=value).
struct Layout {
  int ranks = 1;
  int accum = 1;
  int zero = 0;
  const char* transport = "auto";
  const char* set = "prefetch=true";
};

// `--set` for each of a layout's comma-separated settings.
inline std::vector<std::string> SetArgs(const std::string& settings) {
  std::vector<std::string> args;
  for (const absl::string_view set : absl::StrSplit(settings, ',', absl::SkipEmpty())) {
    args.insert(args.end(), {"--set", std::string(set)});
  }
  return args;
}

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("weft_train_test_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A varied, deterministic text: enough bytes for both splits.
    std::ofstream corpus(dir_ / "corpus.txt");
    const char* words[] = {"the ",   "quick ", "brown ", "fox ",  "jumps ", "over ",   "lazy ",
                           "dogs; ", "weft ",  "and ",   "warp ", "make ",  "cloth.\n"};
    uint32_t x = 12345;
    for (int i = 0; i < 40000; ++i) {
      x = x * 1103515245u + 12345u;
      corpus << words[(x >> 16) % 13];
    }
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Runs weft-train (under weftrun when ranks > 0) and returns its result.
  ProcessResult Train(int ranks, const std::string& out, std::vector<std::string> args,
                      Env env = {}) {
    std::vector<std::string> argv;
    if (ranks > 0) {
      argv = {WEFTRUN, "-n", std::to_string(ranks), "--timeout", std::to_string(60 * TimeScale()),
              "--"};
    }
    // Ranks that pretend to live on the hosts WEFT_FAKE_HOSTS names, one word per rank.
    if (std::any_of(env.begin(), env.end(),
                    [](const auto& e) { return e.first == "WEFT_FAKE_HOSTS"; })) {
      argv.push_back(WITH_HOST);
    }
    argv.insert(argv.end(),
                {WEFT_TRAIN, "--config", config_, "--out", (dir_ / out).string(), "--set",
                 "data=" + (dir_ / "corpus.txt").string(), "--set", "sample_tokens=0"});
    argv.insert(argv.end(), args.begin(), args.end());
    env.emplace_back("WEFT_TIMEOUT", std::to_string(30 * TimeScale()));
    return RunProcess(argv, env, Scaled(std::chrono::seconds(70)));
  }

  // step → the value of `key` exactly as written in metrics.jsonl.
  std::map<int, std::string> Metric(const std::string& out, const std::string& key) {
    std::map<int, std::string> values;
    std::ifstream in(dir_ / out / "metrics.jsonl");
    std::string line;
    const std::string field = "\"" + key + "\": ";
    while (std::getline(in, line)) {
      int step = 0;
      const size_t at = line.find(field);
      if (std::sscanf(line.c_str(), "{\"step\": %d", &step) != 1 || at == std::string::npos) {
        continue;
      }
      const size_t start = at + field.size();
      values[step] = line.substr(start, line.find_first_of(",}", start) - start);
    }
    return values;
  }
  std::map<int, std::string> Losses(const std::string& out) { return Metric(out, "loss"); }

  // The parameters of the checkpoint written after `step` anywhere under DIR/checkpoints, as
  // whole tensors in manifest order, after verifying every file.
  std::vector<SavedTensor> Checkpoint(const std::string& out, int step) {
    const std::string name = absl::StrFormat("ckpt-%08d", step);
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / out / "checkpoints")) {
      if (entry.path().filename() != name) continue;
      absl::StatusOr<std::unique_ptr<shard::CheckpointReader>> reader =
          shard::CheckpointReader::Open(entry.path().string());
      EXPECT_TRUE(reader.ok()) << reader.status();
      if (!reader.ok()) return {};
      EXPECT_TRUE((*reader)->Verify().ok());
      std::vector<SavedTensor> tensors;
      for (const shard::ManifestTensor& t : (*reader)->manifest().tensors) {
        tensors.push_back({t.info, std::vector<float>(t.info.elements())});
        EXPECT_TRUE((*reader)
                        ->Read(static_cast<int>(tensors.size() - 1), (*reader)->FindArray("params"),
                               0, t.info.elements(), tensors.back().values.data())
                        .ok());
      }
      return tensors;
    }
    ADD_FAILURE() << "no " << name << " under " << out;
    return {};
  }

  // `common`: settings of every run, the single rank's included.
  void ExpectLayoutsMatchSingleRank(const std::vector<Layout>& layouts,
                                    const std::string& common = "", Tolerance tol = {});
  void ExpectBabyLossesFollowSingleRank(const std::vector<Layout>& layouts);
  // A resumed layout: ranks (0: one process), its settings, and whether it must match bit for bit.
  struct Resume {
    int ranks;
    std::string set;
    bool exact;
  };
  // Runs `args` (12 steps, checkpoints every 3) with `first` settings on `ranks` to the end and
  // cut after step 6, then resumes the cut run on each layout and compares its losses.
  void ExpectResumesOnLayouts(const std::vector<std::string>& args, int ranks,
                              const std::string& first, const std::vector<Resume>& resumes);
  // The losses of steps 7-12 of a run resumed after step 6 into `out`: the same bits as the
  // uninterrupted run's (`full`) when `exact`, else within 1e-5 relative.
  void ExpectResumedLosses(const std::string& out, const std::map<int, std::string>& full,
                           bool exact);

  fs::path dir_;
  const char* config_ = TINY_CONFIG;  // what Train runs
};

void ExpectOk(const ProcessResult& r);

// Each tensor of `got` within `rel` of `ref` in relative norm, ‖got − ref‖ / ‖ref‖. The key
// part of each attention bias is the exception: softmax ignores a shift shared by a row's scores,
// so that bias's gradient is zero in exact arithmetic and fp32 rounding noise in practice, which
// AdamW turns into steps of random sign. It only has to stay as small as noise (‖·‖ ≤ `noise`).
void ExpectSameParams(const std::vector<SavedTensor>& ref, const std::vector<SavedTensor>& got,
                      double rel, const std::string& what, double noise = 1e-4);

}  // namespace weft::testing
