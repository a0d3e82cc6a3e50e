// ShardLayout: equal aligned slices per unit, the maps between flat elements and (rank, offset)
// both ways, and the errors for units that do not tile or are not padded.
#include "weft/shard/shard_layout.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace weft::shard {
namespace {

// Three units of 2 ranks: 64, 32 and 96 elements.
absl::StatusOr<ShardLayout> ThreeUnits(int ranks = 2) {
  return ShardLayout::Create({{"embeddings", 0, 64}, {"h.0", 64, 32}, {"lnf", 96, 96}}, ranks);
}

TEST(ShardLayout, EveryRankOwnsAnEqualAlignedSliceOfEveryUnit) {
  absl::StatusOr<ShardLayout> layout = ThreeUnits();
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->total(), 192u);
  EXPECT_EQ(layout->shard_size(), 96u);
  EXPECT_EQ(layout->slice(0), 32u);
  EXPECT_EQ(layout->shard_offset(2), 48u);
  const Range owned = layout->owned(1, 2);
  EXPECT_EQ(owned.begin, 96u + 48u);
  EXPECT_EQ(owned.length, 48u);
  for (int rank = 0; rank < 2; ++rank) {
    for (const Range& r : layout->owned(rank)) EXPECT_EQ(r.begin % ShardLayout::kAlign, 0u);
  }
}

TEST(ShardLayout, LocateAndGlobalAreInverse) {
  absl::StatusOr<ShardLayout> layout = ThreeUnits();
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<int> seen(layout->total(), 0);
  for (int rank = 0; rank < 2; ++rank) {
    for (size_t offset = 0; offset < layout->shard_size(); ++offset) {
      const size_t flat = layout->Global(rank, offset);
      ASSERT_LT(flat, layout->total());
      ++seen[flat];
      const ShardLayout::Location at = layout->Locate(flat);
      EXPECT_EQ(at.rank, rank);
      EXPECT_EQ(at.offset, offset);
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);  // every element has exactly one owner
  EXPECT_EQ(layout->Locate(64 + 16).rank, 1);  // the second half of h.0
  EXPECT_EQ(layout->Locate(64 + 16).offset, 32u);
}

TEST(ShardLayout, HashesDifferWithTheUnitsAndTheRanks) {
  EXPECT_EQ(ThreeUnits()->hash(), ThreeUnits()->hash());
  EXPECT_NE(
      ThreeUnits(2)->hash(),
      ShardLayout::Create({{"embeddings", 0, 64}, {"h.1", 64, 32}, {"lnf", 96, 96}}, 2)->hash());
  EXPECT_NE(ShardLayout::Create({{"a", 0, 64}}, 2)->hash(),
            ShardLayout::Create({{"a", 0, 64}}, 4)->hash());
}

TEST(ShardLayout, UnpaddedOrUntiledUnitsAreRefusedWithThePaddingTheyNeed) {
  EXPECT_EQ(ShardLayout::PaddedLength(100, 4), 128u);
  EXPECT_EQ(ShardLayout::PaddedLength(128, 4), 128u);
  absl::StatusOr<ShardLayout> unpadded = ShardLayout::Create({{"h.0", 0, 100}}, 4);
  ASSERT_FALSE(unpadded.ok());
  EXPECT_TRUE(absl::StrContains(unpadded.status().message(), "unit h.0 has 100 elements"))
      << unpadded.status();
  EXPECT_TRUE(absl::StrContains(unpadded.status().message(), "pad it to 128")) << unpadded.status();
  absl::StatusOr<ShardLayout> gap = ShardLayout::Create({{"a", 0, 64}, {"b", 80, 64}}, 2);
  ASSERT_FALSE(gap.ok());
  EXPECT_TRUE(absl::StrContains(gap.status().message(), "unit b begins at element 80"))
      << gap.status();
  EXPECT_FALSE(ShardLayout::Create({}, 2).ok());
  EXPECT_FALSE(ShardLayout::Create({{"a", 0, 64}}, 0).ok());
}

}  // namespace
}  // namespace weft::shard
