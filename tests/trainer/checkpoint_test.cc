// The checkpoint module in process: the tensor table round trip, CheckLayout's report of each
// kind of difference (a reordered layout only exists here: the CLI cannot reorder tensors), and
// run directories (a fresh run never prunes or resumes another run's checkpoints; stale *.tmp
// files are removed when a run is continued).
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

CheckpointState StateFor(const ParamLayout& layout, int64_t step) {
  CheckpointState state;
  state.step = step;
  state.data_cursor = static_cast<uint64_t>(step) * 8;
  state.config_json = "{\"n_layer\": 1}";
  state.tensors = TensorTable(layout);
  for (size_t i = 0; i < layout.total(); ++i) state.params.push_back(0.5f * static_cast<float>(i));
  state.adam_m.assign(layout.total(), 1.0f);
  state.adam_v.assign(layout.total(), 2.0f);
  return state;
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

  // The steps of the checkpoint files in run `run`.
  std::set<int64_t> Steps(int run) {
    std::set<int64_t> steps;
    for (const auto& entry : fs::directory_iterator(RunDir(dir_, run))) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("ckpt-") && name.ends_with(".bin")) {
        steps.insert(std::stoll(name.substr(5, 8)));
      }
    }
    return steps;
  }

  std::string dir_;
};

// The layout the checkpoints below are written with.
ParamLayout Ab() { return Layout({{"a", {2, 3}}, {"b", {4}}}); }

TEST_F(CheckpointTest, RoundTripKeepsTheTensorTable) {
  absl::StatusOr<int> run = OpenRun(dir_, /*resume=*/false);
  ASSERT_TRUE(run.ok()) << run.status();
  const CheckpointState written = StateFor(Ab(), 3);
  ASSERT_TRUE(WriteCheckpoint(RunDir(dir_, *run), written, 2).ok());
  absl::StatusOr<CheckpointState> read = ReadCheckpoint(CheckpointPath(RunDir(dir_, *run), 3));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->tensors, written.tensors);
  ASSERT_EQ(read->tensors.size(), 2u);
  EXPECT_EQ(read->tensors[0], (TensorRecord{"a", {2, 3}, 0, "f32"}));
  EXPECT_EQ(read->tensors[1], (TensorRecord{"b", {4}, 6, "f32"}));
  EXPECT_EQ(read->params, written.params);
  EXPECT_EQ(read->config_json, written.config_json);
  EXPECT_TRUE(CheckLayout(read->tensors, Ab()).ok());
}

TEST_F(CheckpointTest, ReorderedLayoutSaysTheTensorOrderDiffers) {
  ASSERT_TRUE(WriteCheckpoint(dir_, StateFor(Ab(), 1), 2).ok());
  absl::StatusOr<CheckpointState> read = ReadCheckpoint(CheckpointPath(dir_, 1));
  ASSERT_TRUE(read.ok()) << read.status();
  const absl::Status s = CheckLayout(read->tensors, Layout({{"b", {4}}, {"a", {2, 3}}}));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(),
            "tensor order differs: b at offset 6 in the checkpoint, 0 in the model; "
            "a at offset 0 in the checkpoint, 4 in the model");
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
  for (int step = 2; step <= 12; step += 2) {
    ASSERT_TRUE(WriteCheckpoint(RunDir(dir_, 1), StateFor(Ab(), step), 3).ok());
  }
  absl::StatusOr<int> fresh = OpenRun(dir_, /*resume=*/false);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*fresh, 2);
  for (int step = 2; step <= 4; step += 2) {
    ASSERT_TRUE(WriteCheckpoint(RunDir(dir_, 2), StateFor(Ab(), step), 3).ok());
  }
  // Pruning stayed inside each run: the old run's higher steps did not push out the new ones.
  EXPECT_EQ(Steps(1), (std::set<int64_t>{8, 10, 12}));
  EXPECT_EQ(Steps(2), (std::set<int64_t>{2, 4}));

  const fs::path stale = fs::path(RunDir(dir_, 2)) / "ckpt-00000006.bin.tmp";
  std::ofstream(stale) << "half a checkpoint";
  absl::StatusOr<int> resumed = OpenRun(dir_, /*resume=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, 2);
  EXPECT_FALSE(fs::exists(stale));
  std::vector<std::string> rejected;
  std::string path;
  const std::optional<CheckpointState> state = LoadNewestValid(RunDir(dir_, 2), &rejected, &path);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 4);
  EXPECT_TRUE(rejected.empty());
}

TEST_F(CheckpointTest, ResumeWithoutAnyRunStartsRunOne) {
  absl::StatusOr<int> run = OpenRun(dir_, /*resume=*/true);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(*run, 1);
  EXPECT_TRUE(fs::is_directory(RunDir(dir_, 1)));
}

}  // namespace
}  // namespace weft::trainer
