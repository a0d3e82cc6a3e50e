// AllocShared buffers: located from any pointer inside them, and mapped by another process.
#include "shared_buffers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"
#include "weft/comm/shared_memory.h"

namespace weft {
namespace {

TEST(SharedBuffers, LocatesRangesInsideABufferOnly) {
  absl::StatusOr<void*> buffer = AllocShared(1 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  auto* base = static_cast<std::byte*>(*buffer);
  const SharedLocation inside = LocateShared(base + 4096, 1000);
  EXPECT_NE(inside.id, 0u);
  EXPECT_EQ(inside.offset, 4096u);
  EXPECT_EQ(inside.bytes, size_t{1} << 20);
  EXPECT_EQ(LocateShared(base + (1 << 20) - 10, 11).id, 0u);  // runs past the end
  int on_stack = 0;
  EXPECT_EQ(LocateShared(&on_stack, sizeof(on_stack)).id, 0u);
  EXPECT_TRUE(FreeShared(base).ok());
  EXPECT_EQ(LocateShared(base, 1).id, 0u);
  EXPECT_EQ(FreeShared(base).code(), absl::StatusCode::kInvalidArgument);  // twice
  EXPECT_EQ(AllocShared(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedBuffers, AnotherProcessMapsAndSeesTheSameBytes) {
  absl::StatusOr<void*> buffer = AllocShared(8192);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  auto* base = static_cast<char*>(*buffer);
  std::strcpy(base + 100, "written by the owner");
  const SharedLocation where = LocateShared(base + 100, 32);
  const pid_t owner = getpid();
  int to_owner[2];
  ASSERT_EQ(pipe(to_owner), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);
    // The child's own copy of the registry does not matter: it maps through the owner's fd.
    PeerBufferMaps maps;
    absl::StatusOr<std::byte*> mapped = maps.Map(owner, where);
    bool ok =
        mapped.ok() && std::strcmp(reinterpret_cast<char*>(*mapped), "written by the owner") == 0;
    if (ok) std::strcpy(reinterpret_cast<char*>(*mapped), "answered");
    const char verdict = ok ? 'y' : 'n';
    _exit(write(to_owner[1], &verdict, 1) == 1 ? 0 : 1);
  }
  char verdict = 0;
  ASSERT_EQ(read(to_owner[0], &verdict, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(verdict, 'y');
  EXPECT_STREQ(base + 100, "answered");
  close(to_owner[0]);
  close(to_owner[1]);
  EXPECT_TRUE(FreeShared(base).ok());
}

}  // namespace
}  // namespace weft
