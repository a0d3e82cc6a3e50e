// BufferPool: a buffer given back is handed out again for the same size, zeroed on request, and
// the live and peak byte counts follow what is out.
#include "weft/shard/buffer_pool.h"

#include <gtest/gtest.h>

namespace weft::shard {
namespace {

TEST(BufferPool, ReusesBuffersBySizeAndCountsWhatIsOut) {
  BufferPool pool;
  float* a = pool.Take(100, true);
  float* b = pool.Take(200, false);
  EXPECT_EQ(pool.live_bytes(), 300 * sizeof(float));
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a[i], 0.0f);
  a[7] = 3.0f;
  pool.Give(a, 100);
  EXPECT_EQ(pool.live_bytes(), 200 * sizeof(float));
  float* again = pool.Take(100, false);
  EXPECT_EQ(again, a);  // the same memory, no new allocation
  EXPECT_EQ(again[7], 3.0f);
  pool.Give(again, 100);
  float* zeroed = pool.Take(100, true);
  EXPECT_EQ(zeroed, a);
  EXPECT_EQ(zeroed[7], 0.0f);
  pool.Give(zeroed, 100);
  pool.Give(b, 200);
  EXPECT_EQ(pool.live_bytes(), 0u);
  EXPECT_EQ(pool.peak_bytes(), 300 * sizeof(float));
}

}  // namespace
}  // namespace weft::shard
