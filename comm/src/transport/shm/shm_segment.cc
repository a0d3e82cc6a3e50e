#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {
namespace {

// Long enough to recognise the communicator in `ls /dev/shm`, short enough that the whole name
// stays far below NAME_MAX.
constexpr size_t kMaxReadableChars = 64;

absl::Status ErrnoStatus(absl::StatusCode code, absl::string_view what, const std::string& name,
                         int error, absl::string_view hint = "") {
  return absl::Status(code, absl::StrCat("shared memory: ", what, " ", name, ": ", strerror(error),
                                         hint.empty() ? "" : " (", hint, hint.empty() ? "" : ")"));
}

absl::StatusOr<void*> Map(const std::string& name, int fd, size_t bytes) {
  // MAP_POPULATE builds the page tables now, so the first message does not pay for faults.
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) {
    return ErrnoStatus(absl::StatusCode::kResourceExhausted, "mmap", name, errno);
  }
  return data;
}

}  // namespace

std::string ShmObjectName(absl::string_view unique_name, absl::string_view role) {
  std::string readable(unique_name.substr(0, kMaxReadableChars));
  for (char& c : readable) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    if (!keep) c = '_';
  }
  return absl::StrFormat("/weft.%s.%016x.%s", readable, Fnv1a(unique_name), role);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { Release(); }

void ShmSegment::Release() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  Unlink();
}

void ShmSegment::Unlink() {
  if (owns_name_) shm_unlink(name_.c_str());
  owns_name_ = false;
}

absl::StatusOr<ShmSegment> ShmSegment::Create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return ErrnoStatus(absl::StatusCode::kAlreadyExists, "create", name, error,
                         "another communicator on this host uses the same unique name, or a "
                         "crashed job left it behind: remove it from /dev/shm");
    }
    return ErrnoStatus(absl::StatusCode::kUnavailable, "create", name, error);
  }
  ShmSegment segment;
  segment.name_ = name;
  segment.owns_name_ = true;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(absl::StatusCode::kResourceExhausted, "resize", name, error);
  }
  // Reserving the pages now turns a full /dev/shm into this error instead of a SIGBUS on first
  // touch, possibly in a peer and in the middle of a collective.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    close(fd);
    return ErrnoStatus(absl::StatusCode::kResourceExhausted,
                       absl::StrCat("reserve ", bytes, " bytes for"), name, error,
                       "is /dev/shm full or too small? check `df -h /dev/shm`; containers need a "
                       "larger --shm-size");
  }
  absl::StatusOr<void*> data = Map(name, fd, bytes);
  close(fd);
  if (!data.ok()) return data.status();
  segment.data_ = *data;
  segment.size_ = bytes;
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::Open(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    return ErrnoStatus(absl::StatusCode::kUnavailable, "open", name, error,
                       error == ENOENT ? "do all ranks of this host share one /dev/shm?" : "");
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(absl::StatusCode::kUnavailable, "stat", name, error);
  }
  const size_t bytes = static_cast<size_t>(info.st_size);
  absl::StatusOr<void*> data = bytes == 0 ? absl::StatusOr<void*>(nullptr) : Map(name, fd, bytes);
  close(fd);
  if (!data.ok()) return data.status();
  ShmSegment segment;
  segment.name_ = name;
  segment.data_ = *data;
  segment.size_ = bytes;
  return segment;
}

}  // namespace weft
