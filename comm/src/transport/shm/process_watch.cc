#include "transport/shm/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace weft {

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      use_kill_(std::exchange(other.use_kill_, false)),
      gone_at_open_(std::exchange(other.gone_at_open_, false)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    pid_ = std::exchange(other.pid_, 0);
    fd_ = std::exchange(other.fd_, -1);
    use_kill_ = std::exchange(other.use_kill_, false);
    gone_at_open_ = std::exchange(other.gone_at_open_, false);
  }
  return *this;
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) close(fd_);
}

ProcessWatch ProcessWatch::Open(pid_t pid) {
  ProcessWatch watch;
  watch.pid_ = pid;
#ifdef SYS_pidfd_open
  const long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    watch.fd_ = static_cast<int>(fd);
    return watch;
  }
  if (errno == ESRCH) {
    watch.gone_at_open_ = true;
    return watch;
  }
#endif
  watch.use_kill_ = true;
  return watch;
}

bool ProcessWatch::Exited() const {
  if (gone_at_open_) return true;
  if (fd_ >= 0) {
    pollfd pfd{fd_, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
  }
  return use_kill_ && kill(pid_, 0) != 0 && errno == ESRCH;
}

std::string PidNamespaceId() {
  char buf[64];
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof(buf));
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof(buf))) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace weft
