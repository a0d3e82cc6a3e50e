// FlatBuffer: released pages read as zeros and stop being resident (mincore), ranges that do not
// cover whole pages keep their values, and moves hand the mapping over.
#include "weft/shard/flat_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

namespace weft::shard {
namespace {

constexpr size_t kPage = FlatBuffer::kPageFloats;

TEST(FlatBuffer, ReleasedPagesReadAsZerosAndAreNoLongerResident) {
  FlatBuffer buffer(4 * kPage);
  EXPECT_EQ(buffer.Resident(0, buffer.size()), 0u);  // untouched: nothing resident yet
  std::fill(buffer.begin(), buffer.end(), 1.5f);
  EXPECT_EQ(buffer.Resident(0, buffer.size()), 4 * kPage);

  buffer.Release(kPage, 2 * kPage);
  EXPECT_EQ(buffer.Resident(0, buffer.size()), 2 * kPage);
  EXPECT_EQ(buffer.Resident(kPage, 2 * kPage), 0u);
  EXPECT_EQ(buffer.data()[kPage], 0.0f);
  EXPECT_EQ(buffer.data()[3 * kPage - 1], 0.0f);
  EXPECT_EQ(buffer.data()[kPage - 1], 1.5f);
  EXPECT_EQ(buffer.data()[3 * kPage], 1.5f);
}

TEST(FlatBuffer, PartialPagesKeepTheirValues) {
  FlatBuffer buffer(3 * kPage);
  std::fill(buffer.begin(), buffer.end(), 2.0f);
  buffer.Release(kPage / 2, kPage);  // no whole page inside
  EXPECT_EQ(buffer.Resident(0, buffer.size()), 3 * kPage);
  EXPECT_EQ(buffer.data()[kPage], 2.0f);
  buffer.Release(kPage / 2, 2 * kPage);  // page 1 only
  EXPECT_EQ(buffer.data()[kPage / 2], 2.0f);
  EXPECT_EQ(buffer.data()[kPage], 0.0f);
  EXPECT_EQ(buffer.data()[2 * kPage], 2.0f);
}

TEST(FlatBuffer, MovesHandTheMappingOver) {
  FlatBuffer a(kPage);
  a.data()[0] = 7.0f;
  FlatBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(b.data()[0], 7.0f);
  FlatBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.size(), kPage);
  EXPECT_EQ(c.data()[0], 7.0f);
}

}  // namespace
}  // namespace weft::shard
