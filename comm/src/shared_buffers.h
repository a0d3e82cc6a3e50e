// The process's registry of AllocShared buffers, and the view of them a communicator's peers
// need: where a pointer lies (which buffer, which offset) in a form another process can use.
//
// Each buffer is a memfd mapped MAP_SHARED. A peer reaches it with pidfd_getfd(owner, fd) and maps
// it once; the buffer's id (unique per process, never reused) guards against the owner having
// closed the fd and reused its number for another buffer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"

namespace weft {

// Where a byte range lies inside a shared buffer, as its owner describes it to peers.
struct SharedLocation {
  uint64_t id = 0;     // 0: not in a shared buffer
  int32_t fd = -1;     // the owner's descriptor of the buffer
  uint64_t bytes = 0;  // the buffer's size
  uint64_t offset = 0;
};

// The shared buffer holding [pointer, pointer + bytes) in this process, if any.
SharedLocation LocateShared(const void* pointer, size_t bytes);

// Peers' buffers mapped into this process, kept until destruction: a communicator maps each
// buffer of each peer once.
class PeerBufferMaps {
 public:
  PeerBufferMaps() = default;
  ~PeerBufferMaps();
  PeerBufferMaps(const PeerBufferMaps&) = delete;
  PeerBufferMaps& operator=(const PeerBufferMaps&) = delete;

  // Where `where` (described by process `pid`) lies in this process's memory.
  absl::StatusOr<std::byte*> Map(pid_t pid, const SharedLocation& where);

 private:
  struct Mapping {
    std::byte* base;
    size_t bytes;
  };
  std::map<std::pair<pid_t, uint64_t>, Mapping> maps_;
};

}  // namespace weft
