#include "weft/offload/io_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace weft::offload {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path, int code) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(code));
  if (code == ENOENT) return absl::NotFoundError(message);
  if (code == ENOSPC) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<IoFile>> IoFile::Create(const std::string& path, bool direct,
                                                       const OpenFn& open) {
  const auto do_open = [&](int flags) {
    const int all = flags | O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
    return open ? open(path.c_str(), all, 0600) : ::open(path.c_str(), all, 0600);
  };
  std::string mode = "buffered";
  int fd = -1;
  if (direct) {
    fd = do_open(O_DIRECT);
    if (fd >= 0) {
      mode = "O_DIRECT";
    } else if (errno == EINVAL) {
      mode = absl::StrCat("buffered (O_DIRECT refused: ", std::strerror(EINVAL), ")");
    } else {
      return Errno("cannot create", path, errno);
    }
  }
  if (fd < 0) fd = do_open(0);
  if (fd < 0) return Errno("cannot create", path, errno);
  return std::unique_ptr<IoFile>(new IoFile(fd, path, mode == "O_DIRECT", std::move(mode)));
}

IoFile::~IoFile() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

absl::Status IoFile::Reserve(uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  const off_t length = static_cast<off_t>(bytes);
  if (::fallocate(fd_, 0, 0, length) == 0) return absl::OkStatus();
  if (errno != EOPNOTSUPP)
    return Errno(absl::StrCat("fallocate of ", bytes, " bytes for"), path_, errno);
  if (::ftruncate(fd_, length) == 0) return absl::OkStatus();
  return Errno(absl::StrCat("ftruncate to ", bytes, " bytes of"), path_, errno);
}

}  // namespace weft::offload
