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
#include "train_fixture.h"

namespace weft::testing {
namespace {

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
