// Offloading end to end: AdamW's moments in files, streamed tile by tile through every step (and
// under ZeRO-3 the parameter slices too, read back before each unit's gather), give the very bits
// of the same run in memory (losses and gradient norms as printed, 17 digits) on one rank, under
// ZeRO-1 and ZeRO-3 on two, and in bf16; a memory budget the state does not fit moves them by
// itself (moments first, then the slices); every step's disk traffic is the same; a killed
// offloaded run resumes from its last checkpoint bit for bit.
#include "train_fixture.h"

namespace weft::testing {
namespace {

// Tiles of 1024 floats: the tiny model's moments span hundreds of them.
const char* kSmallTiles = "offload_block_kb=4,offload_tile_blocks=1";

TEST_F(TrainTest, OffloadedOptimizerIsBitIdentical) {
  struct Case {
    int ranks;
    const char* set;
    std::vector<std::string> hows;  // how each run offloads
    const char* budget_moves;       // what the 64 KiB budget's plan says goes to disk
  };
  const std::vector<Case> cases = {{0, "", {"offload=optimizer"}, "AdamW's moments"},
                                   {2, "zero=1", {"offload=optimizer"}, "AdamW's moments"},
                                   {2,
                                    "zero=3,precision=bf16",
                                    {"offload=optimizer", "offload=optimizer+params"},
                                    "and the parameter slices"}};
  for (const Case& c : cases) {
    const std::string ref = absl::StrCat("ref", c.ranks, c.set);
    ExpectOk(Train(c.ranks, ref, SetArgs(c.set)));
    std::vector<std::string> hows = c.hows;
    hows.push_back("memory_budget=64K");
    for (const std::string& how : hows) {
      const std::string out = absl::StrCat("off", c.ranks, c.set, how);
      // No checkpoints or evaluations in between: they move state too.
      const ProcessResult r = Train(
          c.ranks, out,
          SetArgs(absl::StrCat(c.set, ",", how, ",checkpoint_every=0,eval_every=0,", kSmallTiles)));
      ExpectOk(r);
      EXPECT_TRUE(absl::StrContains(r.output, "AdamW's moments")) << r.output;
      if (how.starts_with("memory_budget")) {
        EXPECT_TRUE(absl::StrContains(r.output, c.budget_moves)) << r.output;
      }
      for (const char* key : {"loss", "grad_norm"}) {
        EXPECT_EQ(Metric(out, key), Metric(ref, key)) << out << " " << key;
      }
      // Every step reads and writes each tile of each offloaded array once, and reads each
      // offloaded parameter slice again before its unit's gathers: the same bytes every step.
      const bool slices = absl::StrContains(r.output, "parameter slices");
      const std::map<int, std::string> read = Metric(out, "offload_read_bytes");
      const std::map<int, std::string> written = Metric(out, "offload_write_bytes");
      ASSERT_EQ(read.size(), 20u) << out;
      const long long first_read = std::stoll(read.at(1)),
                      first_written = std::stoll(written.at(1));
      EXPECT_GT(first_written, 20 * 8192) << out;  // tens of tiles of a header and 4 KiB
      EXPECT_EQ(first_read > first_written, slices) << out;
      for (int step = 1; step <= 20; ++step) {
        EXPECT_EQ(std::stoll(read.at(step)), first_read) << out << " step " << step;
        EXPECT_EQ(std::stoll(written.at(step)), first_written) << out << " step " << step;
      }
      EXPECT_GT(std::stoll(Metric(out, "resident_bytes")[20]), 0) << out;
    }
  }
}

TEST_F(TrainTest, OffloadedRunResumesBitIdentically) {
  ExpectResumesOnLayouts(
      {"--steps", "12", "--set", "checkpoint_every=3"}, 2,
      absl::StrCat("zero=1,offload=optimizer,", kSmallTiles),
      {{2, absl::StrCat("zero=1,offload=optimizer,", kSmallTiles), true}, {2, "zero=1", true}});
}

TEST_F(TrainTest, OffloadedParametersResumeBitIdentically) {
  ExpectResumesOnLayouts({"--steps", "12", "--set", "checkpoint_every=3"}, 2,
                         absl::StrCat("zero=3,offload=optimizer+params,", kSmallTiles),
                         {{2, absl::StrCat("zero=3,offload=optimizer+params,", kSmallTiles), true},
                          {2, "zero=3", true}});
}

}  // namespace
}  // namespace weft::testing
