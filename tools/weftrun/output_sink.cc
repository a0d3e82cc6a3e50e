#include "output_sink.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::launcher {

OutputSink::OutputSink(int fd) : fd_(fd), chunk_bytes_(PIPE_BUF) {
  // A regular file never makes a writer wait, so it takes everything at once; pipes and
  // terminals promise room for PIPE_BUF bytes when they report POLLOUT.
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) chunk_bytes_ = SIZE_MAX;
}

std::string* OutputSink::queue() {
  if (broken_) queue_.clear();
  return &queue_;
}

void OutputSink::Discard() {
  queue_.clear();
  sent_ = 0;
}

bool OutputSink::WriteSome() {
  if (!HasPending()) return !broken_;
  const absl::string_view pending = absl::string_view(queue_).substr(sent_);
  // The longest run of whole lines that fits in one chunk; a single line longer than a chunk
  // goes whole, since splitting it would let the other stream's lines land inside it.
  size_t end = pending.size();
  if (end > chunk_bytes_) {
    size_t last = pending.rfind('\n', chunk_bytes_ - 1);
    if (last == absl::string_view::npos) last = pending.find('\n');
    end = last == absl::string_view::npos ? pending.size() : last + 1;
  }
  if (!WriteRange(sent_ + end)) {
    broken_ = true;
    Discard();
    return false;
  }
  if (sent_ == queue_.size()) {
    Discard();
  } else if (sent_ >= kHighWaterBytes) {
    queue_.erase(0, sent_);
    sent_ = 0;
  }
  return true;
}

bool OutputSink::WriteRange(size_t end) {
  while (sent_ < end) {
    const ssize_t n = write(fd_, queue_.data() + sent_, end - sent_);
    if (n > 0) {
      sent_ += static_cast<size_t>(n);
    } else if (n == 0) {
      return false;  // a stream that accepts nothing would otherwise be retried forever
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The stream was handed to us non-blocking: wait for room rather than spin.
      pollfd pfd{fd_, POLLOUT, 0};
      poll(&pfd, 1, 1000);
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

}  // namespace weft::launcher
