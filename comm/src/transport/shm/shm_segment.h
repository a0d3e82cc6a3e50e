// ShmSegment: a named POSIX shared-memory object (/dev/shm) mapped into this process.
//
// One rank creates an object and the others attach to it by name; the creator removes the name as
// soon as everyone is attached, so the memory lives exactly as long as some process maps it and a
// crash leaks nothing. Creation reserves every page up front, so a full /dev/shm is an error here
// rather than a SIGBUS in the middle of a collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weft/kernels/hash.h"

namespace weft {

// The object name for `role` (e.g. "ring.3-1") of the communicator `unique_name`:
// "/weft.<unique_name, sanitised and cut short>.<hash of unique_name>.<role>". The hash keeps
// names apart when sanitising or cutting makes two unique names look alike.
std::string ShmObjectName(absl::string_view unique_name, absl::string_view role);

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  // Unmaps; also removes the name if this process created it and has not removed it yet, so an
  // error path that drops a segment leaves nothing behind.
  ~ShmSegment();

  // Creates `name` (which must not exist), sized `bytes`, zero-filled, every page reserved, and
  // maps it read-write.
  static absl::StatusOr<ShmSegment> Create(const std::string& name, size_t bytes);

  // Maps an existing object read-write at its full size.
  static absl::StatusOr<ShmSegment> Open(const std::string& name);

  // Removes the name from /dev/shm; the mapping stays valid. Only the creator calls it.
  void Unlink();

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void Release();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owns_name_ = false;
};

}  // namespace weft
