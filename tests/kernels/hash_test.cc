// Checksum64Stream agrees with Checksum64 however the data is cut, so a file checksummed buffer by
// buffer while written verifies against one read back whole.
#include "weft/kernels/hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace weft {
namespace {

TEST(Checksum64Stream, AnyCutGivesTheWholeBuffersChecksum) {
  std::vector<unsigned char> data(301);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(Mix64(i));
  for (size_t n : {size_t{0}, size_t{5}, size_t{8}, size_t{64}, size_t{301}}) {
    const uint64_t whole = Checksum64(data.data(), n);
    for (size_t piece : {1, 3, 7, 8, 13, 64}) {
      Checksum64Stream stream;
      for (size_t at = 0; at < n; at += piece) {
        stream.Add(data.data() + at, std::min(piece, n - at));
      }
      EXPECT_EQ(stream.Finish(), whole) << n << " bytes in pieces of " << piece;
    }
  }
}

TEST(Checksum64, AFlippedBitChangesIt) {
  std::vector<unsigned char> data(64, 7);
  const uint64_t before = Checksum64(data.data(), data.size());
  data[40] ^= 0x10;
  EXPECT_NE(Checksum64(data.data(), data.size()), before);
}

}  // namespace
}  // namespace weft
