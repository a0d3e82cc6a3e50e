// IoEngine and IoFile: both engines move blocks to a file and back, report short transfers and
// bad requests as errors naming the file and offset, and can be forced by WEFT_OFFLOAD_IO; IoFile
// falls back to buffered I/O where O_DIRECT is refused.
#include "weft/offload/io_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "scratch.h"
#include "weft/offload/aligned_buffer.h"
#include "weft/offload/io_file.h"

namespace weft::offload {
namespace {

using testing::EngineName;
using testing::ScratchDir;

// Reaps until nothing is outstanding, failing the test on any error.
std::vector<IoCompletion> ReapAll(IoEngine& engine) {
  std::vector<IoCompletion> done;
  while (engine.outstanding() > 0) {
    absl::Status s = engine.Reap(absl::Seconds(30), &done);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
  }
  return done;
}

std::unique_ptr<IoFile> MakeFile(const std::string& dir, const std::string& name) {
  std::filesystem::create_directories(dir);
  auto file = IoFile::Create(dir + "/" + name, /*direct=*/true);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

class EngineTest : public ::testing::TestWithParam<IoEngineKind> {};

TEST_P(EngineTest, WritesBlocksAndReadsThemBack) {
  WEFT_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  EXPECT_EQ(engine->name(), EngineName({GetParam(), 0}));
  EXPECT_NE(engine->description().find(std::string(engine->name())), std::string::npos);
  const std::unique_ptr<IoFile> file = MakeFile(ScratchDir(), "blocks");
  ASSERT_NE(file, nullptr);

  // More blocks than the queue depth, so some wait in the engine's queue.
  constexpr size_t kBlocks = 20, kBlock = 2 * kIoAlignment;
  AlignedBuffer out(kBlocks * kBlock), in(kBlocks * kBlock);
  for (size_t i = 0; i < out.size(); ++i) out.data()[i] = static_cast<std::byte>(i * 7 + i / 251);
  std::vector<IoRequest> writes;
  for (size_t b = 0; b < kBlocks; ++b) {
    writes.push_back({IoOp::kWrite, file.get(), b * kBlock, out.data() + b * kBlock, kBlock, b});
  }
  ASSERT_TRUE(engine->Submit(writes).ok());
  EXPECT_EQ(engine->outstanding(), kBlocks);
  std::vector<IoCompletion> done = ReapAll(*engine);
  ASSERT_EQ(done.size(), kBlocks);
  for (const IoCompletion& c : done) {
    EXPECT_TRUE(c.status.ok()) << c.status;
    EXPECT_EQ(c.op, IoOp::kWrite);
    EXPECT_EQ(c.bytes, kBlock);
  }

  std::vector<IoRequest> reads;
  for (size_t b = kBlocks; b-- > 0;) {  // in reverse, so order is the engine's business
    reads.push_back({IoOp::kRead, file.get(), b * kBlock, in.data() + b * kBlock, kBlock, b});
  }
  ASSERT_TRUE(engine->Submit(reads).ok());
  done = ReapAll(*engine);
  ASSERT_EQ(done.size(), kBlocks);
  for (const IoCompletion& c : done) EXPECT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(std::memcmp(in.data(), out.data(), out.size()), 0);
}

TEST_P(EngineTest, ShortReadIsDataLossNamingFileAndOffset) {
  WEFT_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  const std::unique_ptr<IoFile> file = MakeFile(ScratchDir(), "short");
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->Reserve(kIoAlignment).ok());
  AlignedBuffer buffer(2 * kIoAlignment);
  ASSERT_TRUE(engine->Submit({{IoOp::kRead, file.get(), 0, buffer.data(), buffer.size(), 5}}).ok());
  const std::vector<IoCompletion> done = ReapAll(*engine);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 5u);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kDataLoss) << done[0].status;
  EXPECT_NE(done[0].status.message().find(file->path()), std::string::npos) << done[0].status;
  EXPECT_NE(done[0].status.message().find("offset 0"), std::string::npos) << done[0].status;
}

TEST_P(EngineTest, MisalignedRequestIsRefusedAndNothingIsQueued) {
  WEFT_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  const std::unique_ptr<IoFile> file = MakeFile(ScratchDir(), "misaligned");
  ASSERT_NE(file, nullptr);
  AlignedBuffer buffer(2 * kIoAlignment);
  const absl::Status s =
      engine->Submit({{IoOp::kWrite, file.get(), 0, buffer.data(), kIoAlignment, 0},
                      {IoOp::kWrite, file.get(), 100, buffer.data(), kIoAlignment, 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("offset 100"), std::string::npos) << s;
  EXPECT_EQ(engine->outstanding(), 0u);
}

TEST_P(EngineTest, ReapWithNothingOutstandingReturnsAtOnce) {
  WEFT_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  std::vector<IoCompletion> done;
  EXPECT_TRUE(engine->Reap(absl::Hours(1), &done).ok());
  EXPECT_TRUE(done.empty());
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineTest,
                         ::testing::Values(IoEngineKind::kIoUring, IoEngineKind::kThreads),
                         EngineName);

TEST(MakeIoEngine, EnvironmentForcesTheThreadPool) {
  ASSERT_EQ(::setenv("WEFT_OFFLOAD_IO", "threads", 1), 0);
  absl::StatusOr<std::unique_ptr<IoEngine>> engine = MakeIoEngine();
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->name(), "threads");
  EXPECT_NE((*engine)->description().find("WEFT_OFFLOAD_IO"), std::string::npos);
  ASSERT_EQ(::setenv("WEFT_OFFLOAD_IO", "aio", 1), 0);
  EXPECT_EQ(MakeIoEngine().status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(::unsetenv("WEFT_OFFLOAD_IO"), 0);
}

TEST(MakeIoEngine, RefusesABadQueueDepth) {
  EXPECT_EQ(MakeIoEngine({.queue_depth = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeIoEngine({.queue_depth = 65}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IoFile, FallsBackToBufferedWhereODirectIsRefused) {
  const std::string dir = ScratchDir();
  std::filesystem::create_directories(dir);
  // Stands in for a filesystem without O_DIRECT (tmpfs before Linux 6.6, some FUSE mounts).
  const IoFile::OpenFn refuse_direct = [](const char* path, int flags, mode_t mode) {
    if (flags & O_DIRECT) {
      errno = EINVAL;
      return -1;
    }
    return ::open(path, flags, mode);
  };
  absl::StatusOr<std::unique_ptr<IoFile>> file =
      IoFile::Create(dir + "/refused", /*direct=*/true, refuse_direct);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE((*file)->direct());
  EXPECT_NE((*file)->mode().find("O_DIRECT refused"), std::string::npos) << (*file)->mode();
  EXPECT_EQ(::fcntl((*file)->fd(), F_GETFL) & O_DIRECT, 0);
}

TEST(IoFile, IsRemovedWhenDestroyed) {
  const std::string dir = ScratchDir();
  std::unique_ptr<IoFile> file = MakeFile(dir, "scratch");
  ASSERT_NE(file, nullptr);
  const std::string path = file->path();
  EXPECT_TRUE(std::filesystem::exists(path));
  file.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(IoFile, CreateInAMissingDirectoryIsNotFoundNamingThePath) {
  absl::StatusOr<std::unique_ptr<IoFile>> file =
      IoFile::Create(ScratchDir() + "/no/such/dir/f", true);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_NE(file.status().message().find("no/such/dir/f"), std::string::npos);
}

}  // namespace
}  // namespace weft::offload
