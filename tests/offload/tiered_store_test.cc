// TieredStore: arrays round-trip in each tier with both engines, a corrupted byte is DataLoss
// naming its tile, O_DIRECT falls back where refused, the pinned tier is refused in this build,
// and the directory is created and cleaned up.
#include "weft/offload/tiered_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scratch.h"

namespace weft::offload {
namespace {

using testing::EngineName;
using testing::ScratchDir;

// Small tiles (1024 floats) so that tests cover many tiles in little data.
TieredStoreOptions SmallTiles(const std::string& dir, IoEngineKind kind) {
  TieredStoreOptions options;
  options.dir = dir;
  options.block_bytes = kIoAlignment;
  options.tile_blocks = 1;
  options.io = {.kind = kind, .queue_depth = 8};
  return options;
}

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i) + 0.25f;
  return v;
}

std::unique_ptr<TieredStore> MakeStore(const TieredStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<TieredStore>> store = TieredStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

class StoreTest : public ::testing::TestWithParam<IoEngineKind> {
 protected:
  void SetUp() override {
    if (GetParam() == IoEngineKind::kIoUring && !MakeIoEngine({.kind = GetParam()}).ok()) {
      GTEST_SKIP() << "io_uring unavailable";
    }
  }
};

TEST_P(StoreTest, ArraysRoundTripInEachTier) {
  const std::unique_ptr<TieredStore> store = MakeStore(SmallTiles(ScratchDir(), GetParam()));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->engine().name(), EngineName({GetParam(), 0}));
  const size_t tile = store->tile_floats();
  for (const Tier tier : {Tier::kMemory, Tier::kDisk}) {
    for (const size_t size : {size_t{0}, size_t{1}, tile - 1, tile, 3 * tile + 17}) {
      const std::string name = absl::StrCat(TierName(tier), "/", size);
      SCOPED_TRACE(name);
      const std::vector<float> initial = Ramp(size, 1.0f);
      ASSERT_TRUE(store->Add(name, tier, initial).ok());
      std::vector<float> read(size, -1.0f);
      ASSERT_TRUE(store->Read(name, absl::MakeSpan(read)).ok());
      EXPECT_EQ(read, initial);

      const std::vector<float> next = Ramp(size, -3.0f);
      ASSERT_TRUE(store->Write(name, next).ok());
      ASSERT_TRUE(store->Read(name, absl::MakeSpan(read)).ok());
      EXPECT_EQ(read, next);
      EXPECT_EQ(*store->TierOf(name), tier);
      EXPECT_EQ(*store->Size(name), size);
    }
  }
  ASSERT_TRUE(store->Add("zeros", Tier::kDisk, 2 * tile + 3).ok());
  std::vector<float> zeros(2 * tile + 3, 1.0f);
  ASSERT_TRUE(store->Read("zeros", absl::MakeSpan(zeros)).ok());
  EXPECT_EQ(zeros, std::vector<float>(2 * tile + 3, 0.0f));
  EXPECT_GT(store->counters().bytes_read, 0u);
  EXPECT_GT(store->counters().bytes_written, 0u);
}

TEST_P(StoreTest, CorruptedByteIsDataLossNamingTheTile) {
  const std::unique_ptr<TieredStore> store = MakeStore(SmallTiles(ScratchDir(), GetParam()));
  ASSERT_NE(store, nullptr);
  const size_t size = 3 * store->tile_floats() + 5;
  ASSERT_TRUE(store->Add("m", Tier::kDisk, Ramp(size, 0.5f)).ok());
  const std::string path = (*store->FileOf("m"))->path();

  // Flip one byte in the data of tile 1, through a second, buffered descriptor.
  const uint64_t offset = store->TileOffset(1);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  unsigned char byte = 0;
  const off_t at = static_cast<off_t>(offset + kTileHeaderBytes + 321);
  ASSERT_EQ(::pread(fd, &byte, 1, at), 1);
  byte ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &byte, 1, at), 1);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);

  std::vector<float> read(size);
  const absl::Status s = store->Read("m", absl::MakeSpan(read));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(absl::StrCat("array 'm' tile 1 at offset ", offset, " of ", path)),
            std::string::npos)
      << s;
  // Rewriting the array heals it.
  ASSERT_TRUE(store->Write("m", Ramp(size, 2.0f)).ok());
  EXPECT_TRUE(store->Read("m", absl::MakeSpan(read)).ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreTest,
                         ::testing::Values(IoEngineKind::kIoUring, IoEngineKind::kThreads),
                         EngineName);

TEST(TieredStore, WorksUnderDevShmWhateverItsODirectSupport) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const std::unique_ptr<TieredStore> store =
      MakeStore(SmallTiles(ScratchDir("/dev/shm"), IoEngineKind::kAuto));
  ASSERT_NE(store, nullptr);
  const std::vector<float> data = Ramp(5 * store->tile_floats() + 1, 1.5f);
  ASSERT_TRUE(store->Add("p", Tier::kDisk, data).ok());
  EXPECT_TRUE(store->io_mode() == "O_DIRECT" || store->io_mode().starts_with("buffered"))
      << store->io_mode();
  std::vector<float> read(data.size());
  ASSERT_TRUE(store->Read("p", absl::MakeSpan(read)).ok());
  EXPECT_EQ(read, data);
}

TEST(TieredStore, FallsBackToBufferedIoWhereODirectIsRefused) {
  TieredStoreOptions options = SmallTiles(ScratchDir(), IoEngineKind::kAuto);
  options.open_file = [](const char* path, int flags, mode_t mode) {
    if (flags & O_DIRECT) {
      errno = EINVAL;
      return -1;
    }
    return ::open(path, flags, mode);
  };
  const std::unique_ptr<TieredStore> store = MakeStore(options);
  ASSERT_NE(store, nullptr);
  const std::vector<float> data = Ramp(2 * store->tile_floats() + 9, -0.75f);
  ASSERT_TRUE(store->Add("v", Tier::kDisk, data).ok());
  EXPECT_TRUE(store->io_mode().starts_with("buffered (O_DIRECT refused")) << store->io_mode();
  EXPECT_FALSE((*store->FileOf("v"))->direct());
  std::vector<float> read(data.size());
  ASSERT_TRUE(store->Read("v", absl::MakeSpan(read)).ok());
  EXPECT_EQ(read, data);
}

TEST(TieredStore, PinnedHostTierIsRefusedInACpuBuild) {
  const std::unique_ptr<TieredStore> store =
      MakeStore(SmallTiles(ScratchDir(), IoEngineKind::kAuto));
  ASSERT_NE(store, nullptr);
  const absl::Status s = store->Add("param", Tier::kPinnedHost, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("pinned_host"), std::string::npos) << s;
  EXPECT_NE(s.message().find("'param'"), std::string::npos) << s;
  EXPECT_FALSE(store->Contains("param"));
}

TEST(TieredStore, CreatesAMissingDirectoryAndRemovesItsFiles) {
  const std::string dir = ScratchDir() + "/a/b";
  std::filesystem::remove_all(ScratchDir());
  std::unique_ptr<TieredStore> store = MakeStore(SmallTiles(dir, IoEngineKind::kAuto));
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  ASSERT_TRUE(store->Add("x", Tier::kDisk, 100).ok());
  const std::string path = (*store->FileOf("x"))->path();
  EXPECT_TRUE(std::filesystem::exists(path));
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(TieredStore, RefusesBadNamesAndSizes) {
  const std::unique_ptr<TieredStore> store =
      MakeStore(SmallTiles(ScratchDir(), IoEngineKind::kAuto));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Add("a", Tier::kDisk, 10).ok());
  EXPECT_EQ(store->Add("a", Tier::kMemory, 10).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store->Write("a", std::vector<float>(9)).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(10);
  EXPECT_EQ(store->Read("b", absl::MakeSpan(out)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->MemoryData("a").status().code(), absl::StatusCode::kFailedPrecondition);
  TieredStoreOptions bad = SmallTiles(ScratchDir(), IoEngineKind::kAuto);
  bad.block_bytes = 1000;
  EXPECT_EQ(TieredStore::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::offload
