#include "file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backoff.h"

namespace weft {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("file store: ", what, " ", path, ": ", strerror(errno)));
}

}  // namespace

std::string FileStore::PathOf(absl::string_view key) const {
  // Keys contain '/'; flatten them so every key is one file in the directory.
  std::string flat(key);
  for (char& c : flat) {
    if (c == '/') c = '%';
  }
  return absl::StrCat(directory_, "/", flat);
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  const std::string path = PathOf(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create", tmp);
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return ErrnoError("write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("rename", path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::Get(absl::string_view key, const Deadline& deadline) {
  const std::string path = PathOf(key);
  Backoff backoff;
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream content;
      content << in.rdbuf();
      return content.str();
    }
    if (absl::Status s = deadline.Check(absl::StrCat("file store: waiting for key '", key, "'"));
        !s.ok()) {
      return s;
    }
    backoff.Pause();
  }
}

absl::StatusOr<int64_t> FileStore::Add(absl::string_view key, int64_t delta) {
  const std::string path = PathOf(key);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("open", path);
  if (flock(fd, LOCK_EX) != 0) {
    close(fd);
    return ErrnoError("lock", path);
  }
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  int64_t value = 0;
  if (n > 0 && !absl::SimpleAtoi(absl::string_view(buf, static_cast<size_t>(n)), &value)) {
    close(fd);
    return absl::DataLossError(absl::StrCat("file store: key '", key, "' is not an integer"));
  }
  value += delta;
  const std::string text = absl::StrCat(value);
  bool ok = ftruncate(fd, 0) == 0 &&
            pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  close(fd);  // releases the lock
  if (!ok) return ErrnoError("update", path);
  return value;
}

}  // namespace weft
