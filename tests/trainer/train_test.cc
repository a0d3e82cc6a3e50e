// weft-train end to end, with the tiny config on a corpus the test writes:
//  - data parallelism: 1, 2 and 4 ranks, with and without accumulation, give the single-rank
//    losses for the same global batch within 1e-5 relative at every one of 20 steps (they differ
//    only in fp32 summation order; measured ~1e-8);
//  - resume: stopping at a step and resuming gives bit-identical losses afterwards;
//  - a corrupt or truncated newest checkpoint is reported and the previous one is used;
//  - invalid configs fail up front with a clear message.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr double kDataParallelRelTol = 1e-5;

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
  ProcessResult Train(int ranks, const std::string& out, std::vector<std::string> args) {
    std::vector<std::string> argv;
    if (ranks > 0) {
      argv = {WEFTRUN, "-n", std::to_string(ranks), "--timeout", std::to_string(60 * TimeScale()),
              "--"};
    }
    argv.insert(argv.end(),
                {WEFT_TRAIN, "--config", TINY_CONFIG, "--out", (dir_ / out).string(), "--set",
                 "data=" + (dir_ / "corpus.txt").string(), "--set", "sample_tokens=0"});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, Env{{"WEFT_TIMEOUT", std::to_string(30 * TimeScale())}},
                      Scaled(std::chrono::seconds(70)));
  }

  // step → the loss exactly as written in metrics.jsonl.
  std::map<int, std::string> Losses(const std::string& out) {
    std::map<int, std::string> losses;
    std::ifstream in(dir_ / out / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      int step = 0;
      char loss[64];
      if (std::sscanf(line.c_str(), "{\"step\": %d, \"loss\": %63[^,]", &step, loss) == 2) {
        losses[step] = loss;
      }
    }
    return losses;
  }

  fs::path dir_;
};

void ExpectOk(const ProcessResult& r) {
  EXPECT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(TrainTest, DataParallelMatchesSingleRank) {
  ExpectOk(Train(0, "ref", {}));
  const std::map<int, std::string> ref = Losses("ref");
  ASSERT_EQ(ref.size(), 20u);
  // (ranks, accumulation) with the tiny config's global batch of 8.
  const std::vector<std::pair<int, int>> layouts = {{1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}};
  for (const auto& [ranks, accum] : layouts) {
    const std::string out = absl::StrCat("dp", ranks, "x", accum);
    ExpectOk(Train(ranks, out, {"--set", absl::StrCat("grad_accum=", accum)}));
    const std::map<int, std::string> got = Losses(out);
    ASSERT_EQ(got.size(), ref.size()) << out;
    for (const auto& [step, loss] : ref) {
      const double a = std::stod(loss);
      const double b = std::stod(got.at(step));
      EXPECT_LE(std::abs(a - b), kDataParallelRelTol * std::abs(a))
          << out << " step " << step << ": " << loss << " vs " << got.at(step);
    }
  }
}

TEST_F(TrainTest, ResumeIsBitIdenticalOnTwoRanks) {
  const std::vector<std::string> args = {"--steps", "12", "--set", "checkpoint_every=4"};
  ExpectOk(Train(2, "full", args));
  std::vector<std::string> first = args;
  first.insert(first.end(), {"--stop-after", "6"});
  ExpectOk(Train(2, "split", first));
  EXPECT_EQ(Losses("split").size(), 6u);
  std::vector<std::string> second = args;
  second.insert(second.end(), {"--resume", "auto"});
  const ProcessResult resumed = Train(2, "split", second);
  ExpectOk(resumed);
  EXPECT_TRUE(absl::StrContains(resumed.output, "(step 6)")) << resumed.output;
  EXPECT_EQ(Losses("split"), Losses("full"));
}

TEST_F(TrainTest, CorruptOrTruncatedCheckpointFallsBackToThePreviousOne) {
  const std::vector<std::string> args = {"--steps", "10", "--set", "checkpoint_every=4"};
  ExpectOk(Train(0, "full", args));
  const std::map<int, std::string> full = Losses("full");

  for (const std::string damage : {"flip", "truncate"}) {
    const std::string out = "run_" + damage;
    std::vector<std::string> first = args;
    first.insert(first.end(), {"--stop-after", "8"});
    ExpectOk(Train(0, out, first));
    const fs::path newest = dir_ / out / "checkpoints" / "ckpt-00000008.bin";
    ASSERT_TRUE(fs::exists(newest));
    if (damage == "flip") {
      std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(fs::file_size(newest) / 2));
      const char c = static_cast<char>(f.peek());
      f.seekp(static_cast<std::streamoff>(fs::file_size(newest) / 2));
      f.put(static_cast<char>(c ^ 0x10));
    } else {
      fs::resize_file(newest, fs::file_size(newest) - 100);
    }
    std::vector<std::string> second = args;
    second.insert(second.end(), {"--resume", "auto"});
    const ProcessResult resumed = Train(0, out, second);
    ExpectOk(resumed);
    EXPECT_TRUE(
        absl::StrContains(resumed.output, damage == "flip" ? "checksum mismatch" : "truncated"))
        << resumed.output;
    EXPECT_TRUE(absl::StrContains(resumed.output, "(step 4)")) << resumed.output;
    EXPECT_EQ(Losses(out), full) << damage;
  }
}

TEST_F(TrainTest, InvalidConfigsFailUpFront) {
  ProcessResult r = Train(3, "bad_world", {});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "must be divisible by ranks")) << r.output;

  r = Train(0, "bad_heads", {"--set", "n_head=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "divisible by n_head")) << r.output;

  r = Train(0, "bad_key", {"--set", "layers=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "unknown config key \"layers\"")) << r.output;

  r = Train(0, "bad_value", {"--set", "lr=fast"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "is not a number")) << r.output;
}

TEST_F(TrainTest, SingleProcessReportsProgressPlotAndSample) {
  const ProcessResult r = Train(0, "cli", {"--set", "sample_tokens=16"});
  ExpectOk(r);
  EXPECT_TRUE(absl::StrContains(r.output, "step 20/20 | loss ")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "val loss")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "sample (temperature")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "loss curve: ")) << r.output;
  std::ifstream in(dir_ / "cli" / "metrics.jsonl");
  std::string first;
  std::getline(in, first);
  for (const char* key : {"\"step\": 1", "\"loss\"", "\"lr\"", "\"tokens_per_s\""}) {
    EXPECT_TRUE(absl::StrContains(first, key)) << first;
  }
  EXPECT_TRUE(fs::exists(dir_ / "cli" / "checkpoints" / "latest"));
}

}  // namespace
}  // namespace weft::testing
