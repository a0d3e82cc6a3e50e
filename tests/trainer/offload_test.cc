// Offloading end to end: AdamW's moments in files, streamed tile by tile through every step, give
// the very bits of the same run in memory (losses and gradient norms as printed, 17 digits) on one
// rank, under ZeRO-1 and ZeRO-3 on two, and in bf16; a memory budget the state does not fit moves
// them by itself; the step lines carry the disk traffic, which equals the prediction; a killed
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
  };
  for (const Case& c : {Case{0, ""}, Case{2, "zero=1"}, Case{2, "zero=3,precision=bf16"}}) {
    const std::string ref = absl::StrCat("ref", c.ranks, c.set);
    ExpectOk(Train(c.ranks, ref, SetArgs(c.set)));
    for (const std::string& how :
         {std::string("offload=optimizer"), std::string("memory_budget=64K")}) {
      const std::string out = absl::StrCat("off", c.ranks, c.set, how);
      // No checkpoints in between: saving one moves the moments too.
      const ProcessResult r =
          Train(c.ranks, out,
                SetArgs(absl::StrCat(c.set, ",", how, ",checkpoint_every=0,", kSmallTiles)));
      ExpectOk(r);
      EXPECT_TRUE(absl::StrContains(r.output, "AdamW's moments")) << r.output;
      for (const char* key : {"loss", "grad_norm"}) {
        EXPECT_EQ(Metric(out, key), Metric(ref, key)) << out << " " << key;
      }
      // Every step reads and writes each tile of both moments once.
      const std::map<int, std::string> read = Metric(out, "offload_read_bytes");
      const std::map<int, std::string> written = Metric(out, "offload_write_bytes");
      ASSERT_EQ(read.size(), 20u) << out;
      const long long first = std::stoll(read.at(1));
      EXPECT_GT(first, 20 * 8192) << out;  // tens of tiles of a header and 4 KiB
      for (const auto& [step, bytes] : read) {
        EXPECT_EQ(std::stoll(bytes), first) << out << " step " << step;
        EXPECT_EQ(written.at(step), bytes) << out << " step " << step;
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

}  // namespace
}  // namespace weft::testing
