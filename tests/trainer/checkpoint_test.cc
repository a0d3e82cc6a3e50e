// The trainer's checkpoint bookkeeping in process: the metadata round trip, CheckLayout's report
// of each kind of difference (tensors are matched by name, so a reordered layout still loads), and
// run directories (a fresh run never prunes or resumes another run's checkpoints; the *.tmp
// leftovers of a crashed save are removed when a run is continued).
#include "checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "param_layout.h"

namespace weft::trainer {
namespace {

namespace fs = std::filesystem;

ParamLayout Layout(const std::vector<std::pair<std::string, std::vector<int>>>& tensors) {
  ParamLayout layout;
  for (const auto& [name, shape] : tensors) layout.Add(name, shape, false);
  return layout;
}

CheckpointMeta MetaFor(int64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.data_cursor = static_cast<uint64_t>(step) * 8;
  meta.sample_rng = 0xfedcba9876543210ULL;
  meta.optimizer_step = step;
  meta.config_json = "{\"n_layer\":1}";
  meta.ranks = 4;
  meta.zero = 3;
  meta.shard_group = 2;
  return meta;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            absl::StrCat("weft_checkpoint_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // The steps of the checkpoints in run `run`.
  std::set<int64_t> Steps(int run) {
    const std::vector<int64_t> steps = CheckpointSteps(RunDir(dir_, run));
    return {steps.begin(), steps.end()};
  }

  // Saves a checkpoint of layout Ab() (one process) as the trainer does, keeping `keep`.
  void Save(const std::string& run_dir, int64_t step, int keep) {
    const ParamLayout layout = Layout({{"a", {2, 3}}, {"b", {4}}});
    std::vector<float> values(layout.total(), 0.5f);
    std::vector<shard::SavedPiece> pieces;
    for (size_t t = 0; t < layout.tensors().size(); ++t) {
      const float* at = values.data() + layout.tensor(static_cast<int>(t)).offset;
      pieces.push_back(
          {static_cast<int>(t), 0, layout.tensor(static_cast<int>(t)).size, {at, at, at}});
    }
    ASSERT_TRUE(shard::SaveCheckpoint(nullptr, CheckpointPath(run_dir, step), kCheckpointArrays,
                                      TensorTable(layout), pieces, MetaJson(MetaFor(step)),
                                      absl::Seconds(10))
                    .ok());
    ASSERT_TRUE(CommitLatest(run_dir, step, keep).ok());
  }

  std::string dir_;
};

// The layout the checkpoints below are written with.
ParamLayout Ab() { return Layout({{"a", {2, 3}}, {"b", {4}}}); }

TEST(CheckpointMetaTest, RoundTrips) {
  absl::StatusOr<JsonValue> json = ParseJson(MetaJson(MetaFor(7)));
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<CheckpointMeta> meta = ParseMeta(*json);
  ASSERT_TRUE(meta.ok()) << meta.status();
  const CheckpointMeta want = MetaFor(7);
  EXPECT_EQ(meta->step, want.step);
  EXPECT_EQ(meta->data_cursor, want.data_cursor);
  EXPECT_EQ(meta->sample_rng, want.sample_rng);
  EXPECT_EQ(meta->optimizer_step, want.optimizer_step);
  EXPECT_EQ(meta->config_json, want.config_json);
  EXPECT_EQ(meta->ranks, 4);
  EXPECT_EQ(meta->zero, 3);
  EXPECT_EQ(meta->shard_group, 2);
  EXPECT_TRUE(absl::IsDataLoss(ParseMeta(*ParseJson(R"({"step": 7})")).status()));
}

TEST_F(CheckpointTest, TensorsAreMatchedByNameSoAReorderedLayoutFits) {
  EXPECT_TRUE(CheckLayout(TensorTable(Ab()), Layout({{"b", {4}}, {"a", {2, 3}}})).ok());
  EXPECT_EQ(TensorTable(Ab())[0], (shard::TensorInfo{"a", {2, 3}, "f32"}));
}

TEST_F(CheckpointTest, ChangedShapesAndTensorsAreNamed) {
  const absl::Status s =
      CheckLayout(TensorTable(Ab()), Layout({{"a", {3, 3}}, {"c", {4}}, {"d", {1}}}));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(),
            "not in the checkpoint: c, d; not in the model: b; a: checkpoint [2,3], model [3,3]");
}

TEST_F(CheckpointTest, FreshRunsAreKeptApartAndResumeContinuesTheNewest) {
  absl::StatusOr<int> old_run = OpenRun(dir_, /*resume=*/false);
  ASSERT_TRUE(old_run.ok()) << old_run.status();
  EXPECT_EQ(*old_run, 1);
  for (int step = 2; step <= 12; step += 2) Save(RunDir(dir_, 1), step, 3);
  absl::StatusOr<int> fresh = OpenRun(dir_, /*resume=*/false);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*fresh, 2);
  for (int step = 2; step <= 4; step += 2) Save(RunDir(dir_, 2), step, 3);
  // Pruning stayed inside each run: the old run's higher steps did not push out the new ones.
  EXPECT_EQ(Steps(1), (std::set<int64_t>{8, 10, 12}));
  EXPECT_EQ(Steps(2), (std::set<int64_t>{2, 4}));

  // A save that crashed before its rename.
  const fs::path stale = fs::path(RunDir(dir_, 2)) / "ckpt-00000006.tmp";
  fs::create_directories(stale);
  std::ofstream(stale / "rank-00000.bin") << "half a checkpoint";
  absl::StatusOr<int> resumed = OpenRun(dir_, /*resume=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, 2);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(CheckpointSteps(RunDir(dir_, 2)), (std::vector<int64_t>{4, 2}));
  std::ifstream latest(RunDir(dir_, 2) + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "ckpt-00000004");
}

TEST_F(CheckpointTest, ResumeWithoutAnyRunStartsRunOne) {
  absl::StatusOr<int> run = OpenRun(dir_, /*resume=*/true);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(*run, 1);
  EXPECT_TRUE(fs::is_directory(RunDir(dir_, 1)));
}

}  // namespace
}  // namespace weft::trainer
