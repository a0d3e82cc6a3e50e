// weft-train end to end, with the tiny config on a corpus the test writes:
//  - data parallelism: 1, 2 and 4 ranks, with and without accumulation, and ZeRO-1, -2, -3 over
//    shared memory and TCP, give the single-rank losses and gradient norms (before clipping) for
//    the same global batch within 1e-5 relative at every one of 20 steps, and the same parameters
//    after them (each tensor within 1e-5 in relative norm). They differ only in fp32 summation
//    order. A reducer that sums instead of averaging (all-reduce or reduce-scatter), or a loss
//    scale without the accumulation factor, scales the gradient norm by the ranks or the
//    accumulation and fails here (checked by breaking each once by hand);
//  - ZeRO-1, -2, -3 and hybrid on 2 and 4 ranks follow one rank's losses within 1e-4 over 200
//    steps of the baby config;
//  - training makes progress: the loss falls by at least 30% in 50 steps;
//  - resume: stopping at a step and resuming gives bit-identical losses afterwards;
//  - checkpoints are written by the ranks that hold the state, one file each, and a corrupt,
//    truncated or unfinished newest checkpoint is reported and the previous one is used;
//  - a fresh run into a used directory gets its own run directory, and resume continues it;
//  - resuming with a changed model or global batch fails, naming what differs;
//  - invalid configs fail up front with a clear message.
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
namespace {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr double kDataParallelRelTol = 1e-5;

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
std::vector<std::string> SetArgs(const std::string& settings) {
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
                                    const std::string& common = "");
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

void ExpectOk(const ProcessResult& r) {
  EXPECT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// Each tensor of `got` within `rel` of `ref` in relative norm, ‖got − ref‖ / ‖ref‖. The key
// part of each attention bias is the exception: softmax ignores a shift shared by a row's scores,
// so that bias's gradient is zero in exact arithmetic and fp32 rounding noise in practice, which
// AdamW turns into steps of random sign. It only has to stay as small as noise (‖·‖ ≤ 1e-4).
void ExpectSameParams(const std::vector<SavedTensor>& ref, const std::vector<SavedTensor>& got,
                      double rel, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const auto compare = [&](const std::string& name, const float* a, const float* b, size_t n,
                           bool noise) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(b[i]) - a[i];
      diff += d * d;
      norm += static_cast<double>(a[i]) * a[i];
    }
    EXPECT_LE(std::sqrt(diff), noise ? 1e-4 : rel * std::sqrt(norm))
        << what << " " << name << ": difference " << std::sqrt(diff) << ", relative "
        << std::sqrt(diff / norm);
  };
  for (size_t t = 0; t < ref.size(); ++t) {
    const std::string& name = ref[t].info.name;
    ASSERT_EQ(got[t].info, ref[t].info) << what;
    const float* a = ref[t].values.data();
    const float* b = got[t].values.data();
    const size_t size = ref[t].values.size();
    if (name.ends_with("attn.qkv.b")) {  // query | key | value
      const size_t third = size / 3;
      compare(name + " (query)", a, b, third, false);
      compare(name + " (key)", a + third, b + third, third, true);
      compare(name + " (value)", a + 2 * third, b + 2 * third, size - 2 * third, false);
    } else {
      compare(name, a, b, size, false);
    }
  }
}

// Runs the tiny config for 20 steps on one rank, then on each layout, and compares every step's
// loss and gradient norm, and the parameters after the last step, with the single rank's.
void TrainTest::ExpectLayoutsMatchSingleRank(const std::vector<Layout>& layouts,
                                             const std::string& common) {
  ExpectOk(Train(0, "ref", SetArgs(common)));
  const std::map<int, std::string> ref_loss = Losses("ref");
  const std::map<int, std::string> ref_norm = Metric("ref", "grad_norm");
  ASSERT_EQ(ref_loss.size(), 20u);
  ASSERT_EQ(ref_norm.size(), 20u);
  const std::vector<SavedTensor> ref_state = Checkpoint("ref", 20);
  for (const Layout& layout : layouts) {
    const std::string out = absl::StrCat("r", layout.ranks, "a", layout.accum, "z", layout.zero,
                                         layout.transport, layout.set);
    std::vector<std::string> args = {"--set", absl::StrCat("grad_accum=", layout.accum), "--set",
                                     absl::StrCat("zero=", layout.zero)};
    for (const std::string& a : SetArgs(absl::StrCat(common, ",", layout.set))) args.push_back(a);
    ExpectOk(Train(layout.ranks, out, args, {{"WEFT_TRANSPORT", layout.transport}}));
    for (const auto& [key, ref] : {std::pair{"loss", ref_loss}, std::pair{"grad_norm", ref_norm}}) {
      const std::map<int, std::string> got = Metric(out, key);
      ASSERT_EQ(got.size(), ref.size()) << out << " " << key;
      for (const auto& [step, value] : ref) {
        const double a = std::stod(value);
        const double b = std::stod(got.at(step));
        EXPECT_LE(std::abs(a - b), kDataParallelRelTol * std::abs(a))
            << out << " step " << step << " " << key << ": " << value << " vs " << got.at(step);
      }
    }
    ExpectSameParams(ref_state, Checkpoint(out, 20), kDataParallelRelTol, out);
  }
}

void TrainTest::ExpectResumedLosses(const std::string& out, const std::map<int, std::string>& full,
                                    bool exact) {
  const std::map<int, std::string> got = Losses(out);
  ASSERT_EQ(got.size(), 12u) << out;
  for (int step = 7; step <= 12; ++step) {
    if (exact) {
      EXPECT_EQ(got.at(step), full.at(step)) << out << " step " << step;
    } else {
      const double a = std::stod(full.at(step));
      EXPECT_LE(std::abs(std::stod(got.at(step)) - a), kDataParallelRelTol * std::abs(a))
          << out << " step " << step << ": " << got.at(step) << " vs " << full.at(step);
    }
  }
}

void TrainTest::ExpectResumesOnLayouts(const std::vector<std::string>& args, int ranks,
                                       const std::string& first,
                                       const std::vector<Resume>& resumes) {
  std::vector<std::string> run = args;
  for (const std::string& a : SetArgs(first)) run.push_back(a);
  ExpectOk(Train(ranks, "full", run));
  const std::map<int, std::string> full = Losses("full");
  run.insert(run.end(), {"--stop-after", "6"});
  ExpectOk(Train(ranks, "cut", run));
  for (const Resume& resume : resumes) {
    const std::string out = absl::StrCat("resume", resume.ranks, resume.set);
    fs::copy(dir_ / "cut", dir_ / out, fs::copy_options::recursive);
    std::vector<std::string> second = args;
    for (const std::string& a : SetArgs(resume.set)) second.push_back(a);
    second.insert(second.end(), {"--resume", "auto"});
    ExpectOk(Train(resume.ranks, out, second));
    ExpectResumedLosses(out, full, resume.exact);
  }
}

// 200 steps of the baby config (12 sequences of 64 tokens, 0.83 M parameters): each layout's loss
// within 1e-4 of one rank's at every step, as fp32 summation orders drift apart over the run.
void TrainTest::ExpectBabyLossesFollowSingleRank(const std::vector<Layout>& layouts) {
  config_ = BABY_CONFIG;
  const std::vector<std::string> args = {"--steps",      "200",   "--set",
                                         "eval_every=0", "--set", "checkpoint_every=0"};
  ExpectOk(Train(0, "ref", args));
  const std::map<int, std::string> ref = Losses("ref");
  ASSERT_EQ(ref.size(), 200u);
  for (const Layout& layout : layouts) {
    const std::string out = absl::StrCat("r", layout.ranks, "z", layout.zero, layout.set);
    std::vector<std::string> run = args;
    run.insert(run.end(), {"--set", absl::StrCat("zero=", layout.zero), "--set", layout.set});
    ExpectOk(Train(layout.ranks, out, run));
    const std::map<int, std::string> got = Losses(out);
    ASSERT_EQ(got.size(), ref.size()) << out;
    double worst = 0;
    for (const auto& [step, value] : ref) {
      const double a = std::stod(value);
      worst = std::max(worst, std::abs(std::stod(got.at(step)) - a) / std::abs(a));
    }
    EXPECT_LE(worst, 1e-4) << out << ": worst relative loss difference over 200 steps";
    std::printf("%s: worst relative loss difference %.3g\n", out.c_str(), worst);
  }
}

TEST_F(TrainTest, ZeroOnTwoRanksFollowsSingleRankOverTwoHundredBabySteps) {
  ExpectBabyLossesFollowSingleRank({{2, 1, 1}, {2, 1, 2}, {2, 1, 3}});
}

TEST_F(TrainTest, ZeroOneAndTwoOnFourRanksFollowSingleRankOverTwoHundredBabySteps) {
  ExpectBabyLossesFollowSingleRank({{4, 1, 1}, {4, 1, 2}});
}

TEST_F(TrainTest, ZeroThreeAndHybridOnFourRanksFollowSingleRankOverTwoHundredBabySteps) {
  ExpectBabyLossesFollowSingleRank({{4, 1, 3}, {4, 1, 2, "auto", "shard_group=2"}});
}

// The tiny config's global batch is 8 sequences.
TEST_F(TrainTest, DataParallelMatchesSingleRank) {
  ExpectLayoutsMatchSingleRank({{1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}});
}

// Tensor parallelism (Megatron-style): tp = 2 and 4, with sequence parallelism, and on a dp × tp
// mesh, give one rank's losses, gradient norms and (gathered) parameters. The tiny config widened
// to 4 heads so that tp = 4 holds whole heads.
TEST_F(TrainTest, TensorParallelMatchesSingleRank) {
  ExpectLayoutsMatchSingleRank({{2, 1, 0, "auto", "tp=2"},
                                {4, 1, 0, "auto", "tp=4"},
                                {2, 1, 0, "auto", "tp=2,sequence_parallel=true"},
                                {4, 1, 0, "auto", "tp=4,sequence_parallel=true"},
                                {4, 1, 0, "auto", "tp=2,dp=2"}},
                               "n_head=4");
}

// Pipeline parallelism: 2 and 4 stages under GPipe, 1F1B and interleaved 1F1B (2 chunks per
// stage), with accumulation over TCP, and on dp × pp (ZeRO-1) and tp × pp (sequence parallel)
// meshes, give one rank's losses, gradient norms and parameters. The tiny config with 4 heads
// and 4 layers.
TEST_F(TrainTest, PipelineMatchesSingleRank) {
  ExpectLayoutsMatchSingleRank(
      {{2, 1, 0, "auto", "pp=2,micro_batches=4,pp_schedule=gpipe"},
       {2, 1, 0, "auto", "pp=2,micro_batches=4,pp_schedule=1f1b"},
       {2, 1, 0, "auto", "pp=2,micro_batches=4,pp_schedule=interleaved,pp_chunks=2"},
       {4, 1, 0, "auto", "pp=4,micro_batches=4,pp_schedule=gpipe"},
       {4, 1, 0, "auto", "pp=4,micro_batches=8,pp_schedule=1f1b"},
       {2, 2, 0, "tcp", "pp=2,micro_batches=2"},
       {4, 1, 1, "auto", "dp=2,pp=2,micro_batches=2"},
       {4, 1, 0, "auto", "tp=2,pp=2,micro_batches=2,sequence_parallel=true"}},
      "n_head=4,n_layer=4");
}

// Interleaved 1F1B on 4 stages × 2 chunks needs 8 layers. (The 8-layer tiny config is the one
// whose parameters drift furthest in fp32: a few elements of a tensor already differ by up to
// 2.9e-5 relative between one rank and 4 data-parallel ranks; this layout stays within 1e-5.)
TEST_F(TrainTest, InterleavedPipelineOnFourStagesMatchesSingleRank) {
  ExpectLayoutsMatchSingleRank(
      {{4, 1, 0, "auto", "pp=4,micro_batches=4,pp_schedule=interleaved,pp_chunks=2"}},
      "n_head=4,n_layer=8");
}

// All three dimensions on 8 ranks: dp 2 × tp 2 × pp 2 with ZeRO-1 inside the data-parallel groups.
TEST_F(TrainTest, ThreeDimensionalMeshMatchesSingleRank) {
  ExpectLayoutsMatchSingleRank({{8, 1, 1, "auto", "dp=2,tp=2,pp=2,micro_batches=2"}},
                               "n_head=4,n_layer=4");
}

// Recomputation runs the same operations again on the same inputs: selective and full give the
// very bits of no recomputation (losses and gradient norms as printed, 17 digits), on one rank and
// with tensor (sequence) parallelism, a pipeline and ZeRO-3, while keeping fewer activation bytes
// (full < selective < none).
TEST_F(TrainTest, RecomputationIsBitIdentical) {
  struct Base {
    int ranks;
    const char* set;
  };
  for (const Base& base : {Base{0, ""}, Base{2, "tp=2,sequence_parallel=true"},
                           Base{2, "pp=2,micro_batches=2"}, Base{2, "zero=3"}}) {
    std::map<std::string, std::map<int, std::string>> loss, norm, bytes;
    for (const char* mode : {"none", "selective", "full"}) {
      const std::string out = absl::StrCat("r", base.ranks, base.set, mode);
      std::vector<std::string> args =
          SetArgs(absl::StrCat("n_head=4,n_layer=4,recompute=", mode, ",", base.set));
      ExpectOk(Train(base.ranks, out, args));
      loss[mode] = Metric(out, "loss");
      norm[mode] = Metric(out, "grad_norm");
      bytes[mode] = Metric(out, "activation_bytes");
      ASSERT_EQ(loss[mode].size(), 20u) << out;
    }
    for (const char* mode : {"selective", "full"}) {
      EXPECT_EQ(loss[mode], loss["none"]) << base.set << " " << mode;
      EXPECT_EQ(norm[mode], norm["none"]) << base.set << " " << mode;
    }
    EXPECT_LT(std::stoll(bytes["full"][20]), std::stoll(bytes["selective"][20])) << base.set;
    EXPECT_LT(std::stoll(bytes["selective"][20]), std::stoll(bytes["none"][20])) << base.set;
  }
}

// Checkpoints reshard across 3D layouts: cut after step 6 on dp 2 × tp 2 × pp 2, resumed on the
// same mesh bit-identically, and within 1e-5 on tp 2 × pp 2 (interleaved) and on one rank.
TEST_F(TrainTest, PipelineCheckpointsResumeAcrossMeshes) {
  ExpectResumesOnLayouts(
      {"--steps", "12", "--set", "checkpoint_every=3", "--set", "batch_size=8", "--set", "n_head=4",
       "--set", "n_layer=8"},
      8, "dp=2,tp=2,pp=2,micro_batches=2,zero=1",
      {{8, "dp=2,tp=2,pp=2,micro_batches=2,zero=1", true},
       {4, "tp=2,pp=2,micro_batches=4,pp_schedule=interleaved,pp_chunks=2", false},
       {0, "", false}});
}

// ZeRO inside the data-parallel group of a dp × tp mesh, with accumulation, over TCP, and with
// sequence parallelism (whose partial gradients are summed over the tensor-parallel group).
TEST_F(TrainTest, TensorParallelComposesWithZero) {
  ExpectLayoutsMatchSingleRank({{4, 1, 1, "auto", "tp=2"},
                                {4, 2, 2, "tcp", "tp=2"},
                                {4, 1, 3, "auto", "tp=2,sequence_parallel=true"}},
                               "n_head=4");
}

// ZeRO-1, -2 and -3 shard the optimizer state, then the gradients, then the parameters: the same
// numbers as one rank, over shared memory and over TCP; hybrid (4 ranks as 2 groups of 2) at every
// stage; ZeRO-3 also without prefetch and with a gathered-bytes cap smaller than one unit.
TEST_F(TrainTest, ZeroStagesMatchSingleRankOverSharedMemory) {
  ExpectLayoutsMatchSingleRank({{2, 1, 1},
                                {2, 1, 2},
                                {2, 1, 3},
                                {4, 2, 1},
                                {4, 1, 2},
                                {4, 2, 3},
                                {4, 1, 3, "shm", "prefetch=false"},
                                {2, 2, 3, "shm", "max_gathered_mb=0.01"},
                                {4, 1, 1, "shm", "shard_group=2"},
                                {4, 1, 2, "shm", "shard_group=2"},
                                {4, 2, 3, "shm", "shard_group=2"}});
}

TEST_F(TrainTest, ZeroStagesMatchSingleRankOverTcp) {
  ExpectLayoutsMatchSingleRank({{2, 2, 1, "tcp"},
                                {2, 1, 2, "tcp"},
                                {2, 1, 3, "tcp"},
                                {4, 1, 1, "tcp"},
                                {4, 2, 2, "tcp"},
                                {4, 1, 3, "tcp"},
                                {4, 1, 2, "tcp", "shard_group=2"}});
}

// shard_group=node takes the shard groups from the hosts the communicator found: on two pretend
// nodes of two ranks each, ZeRO-3 shards over 2 ranks and replicates across the nodes, and still
// follows one rank; nodes of unequal size are refused, naming the sizes.
TEST_F(TrainTest, ShardGroupNodeShardsInsideEachNode) {
  ExpectOk(Train(0, "ref", {}));
  const Env nodes = {{"WEFT_FAKE_HOSTS", "a a b b"}, {"WEFT_SOCKET_IFNAME", "lo"}};
  const std::vector<std::string> args = {"--set", "zero=3", "--set", "shard_group=node"};
  const ProcessResult r = Train(4, "node", args, nodes);
  ExpectOk(r);
  EXPECT_TRUE(absl::StrContains(r.output, "sharded over 2 ranks")) << r.output;
  for (const char* key : {"loss", "grad_norm"}) {
    const std::map<int, std::string> ref = Metric("ref", key), got = Metric("node", key);
    ASSERT_EQ(got.size(), ref.size()) << key;
    for (const auto& [step, value] : ref) {
      EXPECT_LE(std::abs(std::stod(got.at(step)) - std::stod(value)),
                kDataParallelRelTol * std::abs(std::stod(value)))
          << key << " step " << step;
    }
  }
  const ProcessResult uneven =
      Train(4, "uneven", args, {{"WEFT_FAKE_HOSTS", "a a a b"}, {"WEFT_SOCKET_IFNAME", "lo"}});
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(uneven.output, "the nodes hold 1 to 3 ranks")) << uneven.output;
}

// Any layout reads a checkpoint whatever layout saved it: a run stopped after step 6 on 4
// ranks with ZeRO-3 resumes on 4 ranks with ZeRO-3 bit-identically, and on 3 ranks with ZeRO-2,
// 2 ranks with ZeRO-1, 2 ranks without ZeRO and 1 rank within 1e-5 of the uninterrupted run (a
// global batch of 12 divides among them all).
// Checkpoints of a dp × tp mesh hold whole tensors (each rank's parts placed in them): a run cut
// after step 6 on tp = 2 × dp = 2 with ZeRO-1 resumes bit-identically on the same mesh, and within
// 1e-5 on tp = 4 with sequence parallelism, on 2 data-parallel ranks and on 1 rank.
TEST_F(TrainTest, TensorParallelCheckpointsResumeOnAnyLayout) {
  ExpectResumesOnLayouts({"--steps", "12", "--set", "checkpoint_every=3", "--set", "batch_size=12",
                          "--set", "n_head=4"},
                         4, "tp=2,zero=1",
                         {{4, "tp=2,zero=1", true},
                          {4, "tp=4,sequence_parallel=true", false},
                          {2, "zero=2", false},
                          {0, "", false}});
}

TEST_F(TrainTest, ZeroCheckpointsResumeOnAnyLayout) {
  ExpectResumesOnLayouts({"--steps", "12", "--set", "checkpoint_every=3", "--set", "batch_size=12"},
                         4, "zero=3",
                         {{4, "zero=3", true},
                          {3, "zero=2", false},
                          {2, "zero=1", false},
                          {2, "zero=0", false},
                          {0, "zero=0", false}});
}

// The closing sample runs on rank 0 alone; under ZeRO-3 every rank first gathers the parameters.
TEST_F(TrainTest, ZeroThreeEvaluatesAndSamples) {
  const ProcessResult r = Train(
      2, "sample",
      {"--steps", "4", "--set", "zero=3", "--set", "eval_every=2", "--set", "sample_tokens=16"});
  ExpectOk(r);
  EXPECT_TRUE(absl::StrContains(r.output, "val loss")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "sample (temperature")) << r.output;
}

TEST_F(TrainTest, LossFallsByAThirdInFiftySteps) {
  ExpectOk(Train(0, "progress", {"--steps", "50", "--set", "eval_every=0"}));
  const std::map<int, std::string> losses = Losses("progress");
  ASSERT_EQ(losses.size(), 50u);
  const double first = std::stod(losses.at(1));
  const double last = std::stod(losses.at(50));
  EXPECT_LE(last, 0.7 * first) << "step 1 loss " << first << ", step 50 loss " << last;
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
  EXPECT_TRUE(absl::StrContains(resumed.output, "(step 6, saved by 2 ranks")) << resumed.output;
  EXPECT_EQ(Losses("split"), Losses("full"));
}

// The tuner's pick is a function of the call and the layout alone, so the gradients sum in the
// same order in every run: two runs print the same losses and gradient norms.
TEST_F(TrainTest, TwoRunsOnTwoRanksAreBitIdenticalWithTheTunersPicks) {
  const Env tuned = {{"WEFT_ALGO", ""}};  // empty: unset, whatever the caller's environment says
  ExpectOk(Train(2, "first", {}, tuned));
  ExpectOk(Train(2, "second", {}, tuned));
  EXPECT_EQ(Losses("first").size(), 20u);
  EXPECT_EQ(Losses("second"), Losses("first"));
  EXPECT_EQ(Metric("second", "grad_norm"), Metric("first", "grad_norm"));
}

TEST_F(TrainTest, CorruptTruncatedOrUnfinishedCheckpointFallsBackToThePreviousOne) {
  const std::vector<std::string> args = {"--steps", "10", "--set", "checkpoint_every=4"};
  ExpectOk(Train(2, "full", args));
  const std::map<int, std::string> full = Losses("full");

  const std::pair<std::string, std::string> damages[] = {
      {"flip", "rank-00001.bin fails its checksum"},
      {"truncate", "rank-00000.bin holds"},
      {"unfinished", "has no manifest.json"}};
  for (const auto& [damage, message] : damages) {
    const std::string out = "run_" + damage;
    std::vector<std::string> first = args;
    first.insert(first.end(), {"--stop-after", "8"});
    ExpectOk(Train(2, out, first));
    const fs::path newest = dir_ / out / "checkpoints" / "run-001" / "ckpt-00000008";
    ASSERT_TRUE(fs::exists(newest / "manifest.json"));
    if (damage == "flip") {
      const fs::path file = newest / "rank-00001.bin";
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(fs::file_size(file) / 2));
      const char c = static_cast<char>(f.peek());
      f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
      f.put(static_cast<char>(c ^ 0x10));
    } else if (damage == "truncate") {
      fs::resize_file(newest / "rank-00000.bin", fs::file_size(newest / "rank-00000.bin") - 100);
    } else {
      fs::remove(newest / "manifest.json");
    }
    std::vector<std::string> second = args;
    second.insert(second.end(), {"--resume", "auto"});
    const ProcessResult resumed = Train(2, out, second);
    ExpectOk(resumed);
    EXPECT_TRUE(absl::StrContains(resumed.output, message)) << resumed.output;
    EXPECT_TRUE(absl::StrContains(resumed.output, "(step 4,")) << resumed.output;
    EXPECT_EQ(Losses(out), full) << damage;
  }
}

// Each rank writes the slices it holds; one group of a hybrid layout saves for all of them.
TEST_F(TrainTest, CheckpointsAreWrittenByTheRanksThatHoldTheState) {
  struct Case {
    int ranks;
    std::string set;
    size_t files;
  };
  for (const Case& c : {Case{4, "zero=3", 4}, Case{4, "shard_group=2", 2}, Case{2, "zero=0", 2}}) {
    const std::string out = absl::StrCat("r", c.ranks, c.set);
    std::vector<std::string> args = {"--steps", "2", "--set", "zero=2", "--set", c.set};
    ExpectOk(Train(c.ranks, out, args));
    absl::StatusOr<std::unique_ptr<shard::CheckpointReader>> reader = shard::CheckpointReader::Open(
        (dir_ / out / "checkpoints" / "run-001" / "ckpt-00000002").string());
    ASSERT_TRUE(reader.ok()) << reader.status();
    const shard::Manifest& m = (*reader)->manifest();
    EXPECT_EQ(m.world, c.ranks) << out;
    EXPECT_EQ(m.files.size(), c.files) << out;
    EXPECT_EQ(m.arrays, (std::vector<std::string>{"params", "adam_m", "adam_v"}));
    EXPECT_EQ(m.metadata.Find("world")->Find("ranks")->integer, c.ranks);
    EXPECT_TRUE((*reader)->Verify().ok()) << out;
    EXPECT_EQ(Checkpoint(out, 2).size(), m.tensors.size());
  }
}

TEST_F(TrainTest, InvalidConfigsFailUpFront) {
  ProcessResult r = Train(3, "bad_world", {});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "must be divisible by dp × grad_accum")) << r.output;

  r = Train(0, "bad_heads", {"--set", "n_head=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "divisible by n_head")) << r.output;

  r = Train(0, "bad_key", {"--set", "layers=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "unknown config key \"layers\"")) << r.output;

  r = Train(4, "bad_group", {"--set", "zero=2", "--set", "shard_group=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(
      absl::StrContains(r.output, "shard_group (3) must divide the data-parallel ranks (4)"))
      << r.output;

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
  EXPECT_TRUE(fs::exists(dir_ / "cli" / "checkpoints" / "run-001" / "latest"));
}

// The steps of the checkpoint files in DIR/checkpoints/run-NNN.
std::set<int> CheckpointSteps(const fs::path& run_dir) {
  std::set<int> steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("ckpt-") && !name.ends_with(".tmp")) {
      steps.insert(std::stoi(name.substr(5, 8)));
    }
  }
  return steps;
}

TEST_F(TrainTest, FreshRunIntoAUsedDirectoryKeepsBothRunsAndResumeContinuesTheNewest) {
  const std::vector<std::string> every2 = {"--set", "checkpoint_every=2"};
  std::vector<std::string> old_run = every2;
  old_run.insert(old_run.end(), {"--steps", "12"});
  ExpectOk(Train(0, "out", old_run));
  std::vector<std::string> fresh = every2;
  fresh.insert(fresh.end(), {"--steps", "6", "--stop-after", "4"});
  const ProcessResult started = Train(0, "out", fresh);
  ExpectOk(started);
  EXPECT_TRUE(absl::StrContains(started.output, "checkpoints/run-002")) << started.output;
  const fs::path run1 = dir_ / "out" / "checkpoints" / "run-001";
  const fs::path run2 = dir_ / "out" / "checkpoints" / "run-002";
  EXPECT_EQ(CheckpointSteps(run1), (std::set<int>{8, 10, 12}));
  EXPECT_EQ(CheckpointSteps(run2), (std::set<int>{2, 4}));

  // A crash mid-write leaves a .tmp. The schedule and lr may change on resume, the model may not.
  const fs::path stale = run2 / "ckpt-00000005.tmp";  // a step this test never writes
  fs::create_directories(stale);
  std::ofstream(stale / "rank-00000.bin") << "half a checkpoint";
  std::vector<std::string> resume = every2;
  resume.insert(resume.end(), {"--steps", "8", "--set", "lr=0.002", "--resume", "auto"});
  const ProcessResult resumed = Train(0, "out", resume);
  ExpectOk(resumed);
  EXPECT_TRUE(absl::StrContains(resumed.output, "run-002/ckpt-00000004 (step 4,"))
      << resumed.output;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(CheckpointSteps(run1), (std::set<int>{8, 10, 12}));
  EXPECT_EQ(CheckpointSteps(run2), (std::set<int>{4, 6, 8}));
  EXPECT_EQ(Losses("out").size(), 8u);
}

// A resume whose config no longer fits the checkpoint fails, naming every difference it finds.
TEST_F(TrainTest, ResumeWithAChangedModelShapeOrGlobalBatchSaysWhatDiffers) {
  ExpectOk(Train(0, "out", {"--stop-after", "2"}));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"n_embd=64",
       {"does not fit this run: n_embd: checkpoint 32, config 64",
        "wte: checkpoint [256,32], model [256,64]"}},
      {"batch_size=16", {"does not fit this run: batch_size: checkpoint 8, config 16 ("}}};
  for (const auto& [change, messages] : cases) {
    const ProcessResult r = Train(0, "out", {"--resume", "auto", "--set", change});
    EXPECT_NE(r.exit_code, 0) << change;
    for (const std::string& message : messages) {
      EXPECT_TRUE(absl::StrContains(r.output, message)) << change << ": " << r.output;
    }
  }
}

}  // namespace
}  // namespace weft::testing
