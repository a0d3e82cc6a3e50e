#include "weft/shard/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace weft::shard {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int code = errno;
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(code));
  return code == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

}  // namespace

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd, p, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    p += done;
    n -= static_cast<size_t>(done);
  }
  return absl::OkStatus();
}

absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync", path);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  absl::Status s = WriteAll(fd, data.data(), data.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", tmp);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename to", path);
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return SyncPath(parent.empty() ? "." : parent);
}

absl::Status ReadWholeFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  out->clear();
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = Errno("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out->append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace weft::shard
