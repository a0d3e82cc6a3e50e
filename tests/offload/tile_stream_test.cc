// TileStream: a pass that applies a known optimizer update to disk and memory arrays equals the
// same update in memory bit for bit, for 1, 2, 3 and many tiles, with and without a tail; fn's
// errors stop the pass; read-only arrays are never written back.
#include "weft/offload/tile_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scratch.h"

namespace weft::offload {
namespace {

using testing::ScratchDir;

constexpr size_t kTile = kIoAlignment / sizeof(float);  // block_bytes = 4 KiB, 1 block a tile

// An Adam-like step: what the trainer's streaming optimizer does to (param, m, v) given grad.
void Update(float* p, float* m, float* v, const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    p[i] -= 0.01f * m[i] / (std::sqrt(v[i]) + 1e-8f);
  }
}

std::vector<float> Wave(size_t n, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.01f * static_cast<float>(i) + phase);
  return v;
}

struct Case {
  IoEngineKind engine;
  size_t size;
  size_t tile_blocks;
  int prefetch;
};

class StreamTest : public ::testing::TestWithParam<Case> {};

TEST_P(StreamTest, UpdateEqualsTheSameUpdateInMemoryBitForBit) {
  const Case c = GetParam();
  TieredStoreOptions options;
  options.dir = ScratchDir();
  options.block_bytes = kIoAlignment;
  options.tile_blocks = c.tile_blocks;
  options.io = {.kind = c.engine, .queue_depth = 8};
  absl::StatusOr<std::unique_ptr<TieredStore>> made = TieredStore::Create(options);
  if (c.engine == IoEngineKind::kIoUring && !made.ok()) GTEST_SKIP() << made.status();
  ASSERT_TRUE(made.ok()) << made.status();
  TieredStore& store = **made;

  std::vector<float> p = Wave(c.size, 0.0f), m = Wave(c.size, 1.0f), v(c.size, 0.5f);
  const std::vector<float> g = Wave(c.size, 2.0f);
  ASSERT_TRUE(store.Add("param", Tier::kDisk, p).ok());
  ASSERT_TRUE(store.Add("m", Tier::kDisk, m).ok());
  ASSERT_TRUE(store.Add("v", Tier::kMemory, v).ok());
  ASSERT_TRUE(store.Add("grad", Tier::kDisk, g).ok());

  TileStream stream(&store, {{"param"}, {"m"}, {"v"}, {"grad", StreamAccess::kReadOnly}},
                    {.prefetch = c.prefetch});
  for (int step = 0; step < 2; ++step) {
    Update(p.data(), m.data(), v.data(), g.data(), c.size);
    size_t calls = 0, covered = 0;
    const uint64_t written_before = store.counters().bytes_written;
    ASSERT_TRUE(stream
                    .Run([&](const StreamTile& tile) {
                      EXPECT_EQ(tile.index, calls++);
                      EXPECT_EQ(tile.offset, covered);
                      covered += tile.count;
                      EXPECT_EQ(tile.data.size(), 4u);
                      Update(tile.data[0], tile.data[1], tile.data[2], tile.data[3], tile.count);
                      return absl::OkStatus();
                    })
                    .ok());
    EXPECT_EQ(calls, store.TileCount(c.size));
    EXPECT_EQ(covered, c.size);
    // Only param and m go back to disk: grad is read-only and v lives in memory.
    const size_t tail = c.size - (calls - 1) * store.tile_floats();
    const uint64_t per_array = (calls - 1) * (kTileHeaderBytes + c.tile_blocks * kIoAlignment) +
                               kTileHeaderBytes + AlignUp(tail * sizeof(float));
    EXPECT_EQ(store.counters().bytes_written - written_before, 2 * per_array);
  }
  for (const auto& [name, expected] :
       {std::pair<std::string, const std::vector<float>*>{"param", &p},
        {"m", &m},
        {"v", &v},
        {"grad", &g}}) {
    std::vector<float> got(c.size);
    ASSERT_TRUE(store.Read(name, absl::MakeSpan(got)).ok());
    EXPECT_EQ(std::memcmp(got.data(), expected->data(), c.size * sizeof(float)), 0) << name;
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat(c.engine == IoEngineKind::kIoUring ? "io_uring" : "threads", "_", c.size,
                      "_blocks", c.tile_blocks, "_prefetch", c.prefetch);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const IoEngineKind engine : {IoEngineKind::kIoUring, IoEngineKind::kThreads}) {
    for (const size_t size : {kTile, kTile - 3,            // 1 tile, whole and with a tail
                              2 * kTile, 2 * kTile - 100,  // 2 tiles
                              3 * kTile, 3 * kTile - 1,    // 3 tiles
                              37 * kTile + 123}) {         // many, with a tail
      cases.push_back({engine, size, 1, 2});
    }
    cases.push_back({engine, 11 * 3 * kTile + 5, 3, 1});  // tiles of 3 blocks, shallow prefetch
    cases.push_back({engine, 9 * kTile + 1, 1, 8});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Tiles, StreamTest, ::testing::ValuesIn(Cases()), CaseName);

class StreamErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    TieredStoreOptions options;
    options.dir = ScratchDir();
    options.block_bytes = kIoAlignment;
    options.tile_blocks = 1;
    absl::StatusOr<std::unique_ptr<TieredStore>> made = TieredStore::Create(options);
    ASSERT_TRUE(made.ok()) << made.status();
    store_ = *std::move(made);
  }
  std::unique_ptr<TieredStore> store_;
};

TEST_F(StreamErrors, FnErrorStopsThePassAndComesBack) {
  const size_t size = 6 * kTile;
  ASSERT_TRUE(store_->Add("a", Tier::kDisk, std::vector<float>(size, 1.0f)).ok());
  TileStream stream(store_.get(), {{"a"}});
  size_t calls = 0;
  const absl::Status s = stream.Run([&](const StreamTile& tile) {
    ++calls;
    if (tile.index == 2) return absl::AbortedError("stop at tile 2");
    std::fill(tile.data[0], tile.data[0] + tile.count, 2.0f);
    return absl::OkStatus();
  });
  EXPECT_EQ(s, absl::AbortedError("stop at tile 2"));
  EXPECT_EQ(calls, 3u);
  std::vector<float> got(size);
  ASSERT_TRUE(store_->Read("a", absl::MakeSpan(got)).ok());  // the store still works
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_EQ(got[2 * kTile], 1.0f);
  EXPECT_EQ(got[size - 1], 1.0f);
}

TEST_F(StreamErrors, EmptyArraysCallFnNever) {
  ASSERT_TRUE(store_->Add("a", Tier::kDisk, 0).ok());
  ASSERT_TRUE(store_->Add("b", Tier::kMemory, 0).ok());
  TileStream stream(store_.get(), {{"a"}, {"b"}});
  EXPECT_TRUE(stream
                  .Run([](const StreamTile&) -> absl::Status {
                    ADD_FAILURE() << "fn called for an empty array";
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST_F(StreamErrors, RefusesUnequalDuplicateOrUnknownArrays) {
  ASSERT_TRUE(store_->Add("a", Tier::kDisk, 10).ok());
  ASSERT_TRUE(store_->Add("b", Tier::kMemory, 11).ok());
  const auto run = [&](std::vector<StreamArray> arrays, StreamOptions options = {}) {
    return TileStream(store_.get(), std::move(arrays), options).Run([](const StreamTile&) {
      return absl::OkStatus();
    });
  };
  EXPECT_EQ(run({{"a"}, {"b"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({{"a"}, {"a"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({{"a"}, {"c"}}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(run({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({{"a"}}, {.prefetch = 0}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::offload
