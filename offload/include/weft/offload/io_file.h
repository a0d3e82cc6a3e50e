// IoFile: a scratch file for block I/O, opened with O_DIRECT where the filesystem allows it.
//
// O_DIRECT moves data between the disk and the caller's buffer without the page cache, so rates
// are the disk's own and offloaded state does not fill memory twice. Filesystems that refuse it
// (open fails with EINVAL) get buffered I/O instead; direct() and mode() say which one runs.
// Under O_DIRECT every transfer's buffer, offset and length must be multiples of kIoAlignment
// (IoEngine checks this for every request, whichever mode runs, so both behave the same).
// The file is scratch: it is created empty and removed when the IoFile is destroyed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft::offload {

class IoFile {
 public:
  // How a file is opened: ::open(path, flags, mode), returning a descriptor or -1 with errno.
  // Callers may wrap it, e.g. to stand in for a filesystem that refuses O_DIRECT.
  using OpenFn = std::function<int(const char* path, int flags, mode_t mode)>;

  // Creates `path` (truncating an existing file) for reading and writing. With `direct`, opens it
  // with O_DIRECT, or buffered where the filesystem answers EINVAL. Errors name the path.
  static absl::StatusOr<std::unique_ptr<IoFile>> Create(const std::string& path, bool direct,
                                                        const OpenFn& open = nullptr);
  // Closes the file and removes it.
  ~IoFile();
  IoFile(const IoFile&) = delete;
  IoFile& operator=(const IoFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Whether O_DIRECT is in effect.
  bool direct() const { return direct_; }
  // "O_DIRECT", "buffered", or "buffered (O_DIRECT refused: <reason>)".
  const std::string& mode() const { return mode_; }

  // Allocates the file's first `bytes` on disk (fallocate; ftruncate where unsupported), so that
  // writes need not extend the file, which would serialize O_DIRECT writes on ext4 and XFS.
  absl::Status Reserve(uint64_t bytes);

 private:
  IoFile(int fd, std::string path, bool direct, std::string mode)
      : fd_(fd), path_(std::move(path)), direct_(direct), mode_(std::move(mode)) {}

  int fd_;
  std::string path_;
  bool direct_;
  std::string mode_;
};

}  // namespace weft::offload
