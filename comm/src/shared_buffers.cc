#include "shared_buffers.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "weft/comm/shared_memory.h"

namespace weft {
namespace {

struct Buffer {
  size_t bytes;
  int fd;
  uint64_t id;
};

// Buffers by base address. Lookups happen once per collective, allocations rarely: one mutex.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Buffer> buffers;
  uint64_t next_id = 1;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

}  // namespace

absl::StatusOr<void*> AllocShared(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("AllocShared: size 0");
  const int fd = memfd_create("weft-shared", MFD_CLOEXEC);
  if (fd < 0) return absl::ResourceExhaustedError(Errno("AllocShared: memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string error = Errno("AllocShared: ftruncate");
    close(fd);
    return absl::ResourceExhaustedError(error);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string error = Errno("AllocShared: mmap");
    close(fd);
    return absl::ResourceExhaustedError(error);
  }
  // Large collectives stream through these buffers: fewer TLB misses where shmem THP is enabled.
  madvise(base, bytes, MADV_HUGEPAGE);
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  registry.buffers[reinterpret_cast<uintptr_t>(base)] = Buffer{bytes, fd, registry.next_id++};
  return base;
}

absl::Status FreeShared(void* pointer) {
  Registry& registry = TheRegistry();
  Buffer buffer;
  {
    std::lock_guard lock(registry.mutex);
    auto it = registry.buffers.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == registry.buffers.end()) {
      return absl::InvalidArgumentError("FreeShared: not a pointer that AllocShared returned");
    }
    buffer = it->second;
    registry.buffers.erase(it);
  }
  munmap(pointer, buffer.bytes);
  close(buffer.fd);
  return absl::OkStatus();
}

SharedLocation LocateShared(const void* pointer, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(pointer);
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  auto it = registry.buffers.upper_bound(at);
  if (it == registry.buffers.begin()) return {};
  --it;
  const Buffer& buffer = it->second;
  if (at + bytes > it->first + buffer.bytes) return {};
  return SharedLocation{buffer.id, buffer.fd, buffer.bytes, at - it->first};
}

PeerBufferMaps::~PeerBufferMaps() {
  for (const auto& [key, mapping] : maps_) munmap(mapping.base, mapping.bytes);
}

absl::StatusOr<std::byte*> PeerBufferMaps::Map(pid_t pid, const SharedLocation& where) {
  auto it = maps_.find({pid, where.id});
  if (it == maps_.end()) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return absl::UnavailableError(Errno("pidfd_open"));
    const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, where.fd, 0));
    const std::string error = fd < 0 ? Errno("pidfd_getfd") : "";
    close(pidfd);
    if (fd < 0) return absl::UnavailableError(error);
    void* base = mmap(nullptr, where.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const std::string map_error = base == MAP_FAILED ? Errno("mmap") : "";
    close(fd);
    if (base == MAP_FAILED) return absl::UnavailableError(map_error);
    it = maps_
             .emplace(std::make_pair(pid, where.id),
                      Mapping{static_cast<std::byte*>(base), where.bytes})
             .first;
  }
  return it->second.base + where.offset;
}

}  // namespace weft
