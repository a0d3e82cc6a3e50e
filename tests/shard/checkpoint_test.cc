// The sharded checkpoint format in one process: what Save writes reads back range by range across
// piece boundaries; a flipped byte, a short file, a missing or corrupt manifest and pieces that do
// not tile their tensor are each caught and named. (Saves by several ranks, and loading them on
// other layouts, run in the trainer's tests.)
#include "weft/shard/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "weft/shard/durable_file.h"

namespace weft::shard {
namespace {

using ::weft::testing::TempDir;

class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointTest() {
    // Two arrays over two tensors: values encode (array, tensor, element).
    for (int a = 0; a < 2; ++a) {
      for (int t = 0; t < 2; ++t) {
        values_[a][t].resize(tensors_[t].elements());
        for (size_t i = 0; i < values_[a][t].size(); ++i) {
          values_[a][t][i] = static_cast<float>(1000 * a + 100 * t) + static_cast<float>(i) / 8;
        }
      }
    }
  }

  // Elements [from, from + count) of tensor t, as a piece.
  SavedPiece Piece(int t, uint64_t from, uint64_t count) const {
    return {t, from, count, {values_[0][t].data() + from, values_[1][t].data() + from}};
  }

  absl::Status Save(const std::string& dir, const std::vector<SavedPiece>& pieces) const {
    return SaveCheckpoint(nullptr, dir, {"params", "adam_m"}, tensors_, pieces,
                          R"({"step": 7, "note": "x"})", absl::Seconds(10));
  }

  std::string Dir(const std::string& name) const { return tmp_.path() + "/" + name; }

  TempDir tmp_{"shard-ckpt"};
  const std::vector<TensorInfo> tensors_ = {{"w", {6, 5}, "f32"}, {"b", {7}, "f32"}};
  std::vector<float> values_[2][2];
};

TEST_F(CheckpointTest, RangesAcrossPiecesReadBackFromAnyArray) {
  // Pieces out of order, one tensor cut in three.
  ASSERT_TRUE(
      Save(Dir("c"), {Piece(1, 0, 7), Piece(0, 12, 18), Piece(0, 0, 5), Piece(0, 5, 7)}).ok());
  EXPECT_FALSE(std::filesystem::exists(Dir("c.tmp")));
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(Dir("c"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->Verify().ok());
  const Manifest& m = (*reader)->manifest();
  EXPECT_EQ(m.world, 1);
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].elements, 37u);
  EXPECT_EQ(m.metadata.Find("step")->integer, 7);
  EXPECT_EQ(m.tensors[0].info, tensors_[0]);
  EXPECT_EQ(m.tensors[0].pieces.size(), 3u);
  const int w = (*reader)->FindTensor("w");
  const int adam_m = (*reader)->FindArray("adam_m");
  ASSERT_EQ(w, 0);
  ASSERT_EQ(adam_m, 1);
  EXPECT_EQ((*reader)->FindTensor("nope"), -1);
  std::vector<float> out(20);
  ASSERT_TRUE((*reader)->Read(w, adam_m, 3, 20, out.data()).ok());  // spans all three pieces
  EXPECT_EQ(out, std::vector<float>(values_[1][0].begin() + 3, values_[1][0].begin() + 23));
  ASSERT_TRUE((*reader)->Read((*reader)->FindTensor("b"), 0, 0, 7, out.data()).ok());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 7), values_[0][1]);
  EXPECT_FALSE((*reader)->Read(w, 0, 25, 6, out.data()).ok());  // past the tensor's end
}

TEST_F(CheckpointTest, TheManifestRoundTrips) {
  ASSERT_TRUE(Save(Dir("c"), {Piece(0, 0, 30), Piece(1, 0, 7)}).ok());
  std::string text;
  ASSERT_TRUE(ReadWholeFile(Dir("c") + "/manifest.json", &text).ok());
  absl::StatusOr<Manifest> m = ParseManifest(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ManifestJson(*m), text);
}

TEST_F(CheckpointTest, PiecesThatDoNotTileATensorAreRefusedBeforeAnythingIsCommitted) {
  absl::Status gap = Save(Dir("gap"), {Piece(0, 0, 10), Piece(0, 11, 19), Piece(1, 0, 7)});
  EXPECT_TRUE(absl::IsInvalidArgument(gap)) << gap;
  EXPECT_NE(gap.message().find("tensor w: elements missing before element 11"), std::string::npos)
      << gap;
  absl::Status twice = Save(Dir("twice"), {Piece(0, 0, 30), Piece(1, 0, 7), Piece(1, 3, 2)});
  EXPECT_NE(twice.message().find("tensor b: elements saved twice"), std::string::npos) << twice;
  absl::Status outside = Save(Dir("outside"), {Piece(0, 25, 6)});
  EXPECT_TRUE(absl::IsInvalidArgument(outside)) << outside;
  for (const char* name : {"gap", "gap.tmp", "twice", "twice.tmp", "outside"}) {
    EXPECT_FALSE(std::filesystem::exists(Dir(name))) << name;
  }
  ASSERT_TRUE(Save(Dir("ok"), {Piece(0, 0, 30), Piece(1, 0, 7)}).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(Save(Dir("ok"), {Piece(0, 0, 30), Piece(1, 0, 7)})));
}

TEST_F(CheckpointTest, AFlippedByteFailsVerifyNamingTheFile) {
  ASSERT_TRUE(Save(Dir("c"), {Piece(0, 0, 30), Piece(1, 0, 7)}).ok());
  {
    std::fstream f(Dir("c") + "/rank-00000.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(Dir("c"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::Status s = (*reader)->Verify();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("rank-00000.bin fails its checksum"), std::string::npos) << s;
  EXPECT_TRUE((*reader)->Verify(1, 2).ok());  // another rank's share: no files
}

TEST_F(CheckpointTest, AShortFileOrABadManifestFailsOpen) {
  ASSERT_TRUE(Save(Dir("c"), {Piece(0, 0, 30), Piece(1, 0, 7)}).ok());
  std::filesystem::resize_file(Dir("c") + "/rank-00000.bin", 100);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(Dir("c"));
  EXPECT_TRUE(absl::IsDataLoss(reader.status())) << reader.status();
  EXPECT_NE(reader.status().message().find("holds 100 bytes, the manifest says 296"),
            std::string::npos)
      << reader.status();

  std::filesystem::create_directories(Dir("empty"));
  EXPECT_TRUE(absl::IsNotFound(CheckpointReader::Open(Dir("empty")).status()));

  ASSERT_TRUE(Save(Dir("d"), {Piece(0, 0, 30), Piece(1, 0, 7)}).ok());
  std::string text;
  ASSERT_TRUE(ReadWholeFile(Dir("d") + "/manifest.json", &text).ok());
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"[0, 0, 0, 30]", "[0, 0, 0, 29]"},  // a gap
      {"[0, 30, 0, 7]", "[0, 31, 0, 7]"},  // outside the file
      {"\"rank-00000.bin\"", "\"../x\""},  // a path out of the directory
      {"\"version\": 1", "\"version\": 9"}, {"\"shape\": [6, 5]", "\"shape\": [6, -5]"},
      {"\"metadata\"", "\"metadatum\""},
  };
  for (const auto& [from, to] : edits) {
    std::string bad = text;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    ASSERT_TRUE(WriteFileAtomically(Dir("d") + "/manifest.json", bad).ok());
    absl::StatusOr<std::unique_ptr<CheckpointReader>> r = CheckpointReader::Open(Dir("d"));
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << to << ": " << r.status();
  }
  ASSERT_TRUE(WriteFileAtomically(Dir("d") + "/manifest.json", text.substr(0, 200)).ok());
  EXPECT_TRUE(absl::IsDataLoss(CheckpointReader::Open(Dir("d")).status()));
}

}  // namespace
}  // namespace weft::shard
