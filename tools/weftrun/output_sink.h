// OutputSink: one of the launcher's own output streams (stdout or stderr) and the text queued
// for it.
//
// The launcher writes only when poll() says the stream has room, so a slow reader (a pager, a
// full pipe) stalls the ranks, whose pipes fill while the queue is full, but never the launcher
// itself: it still reaps ranks, passes on signals and enforces --timeout. Every write ends at a
// line boundary, so lines stay whole even when stdout and stderr are the same pipe (2>&1).
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::launcher {

class OutputSink {
 public:
  // Past this much queued text the launcher stops reading the ranks that write here.
  static constexpr size_t kHighWaterBytes = 1 << 20;

  explicit OutputSink(int fd);

  int fd() const { return fd_; }

  // Where whole lines are appended; text appended once the sink is broken is dropped.
  std::string* queue();

  bool HasPending() const { return !broken_ && sent_ < queue_.size(); }
  bool Full() const { return HasPending() && queue_.size() - sent_ >= kHighWaterBytes; }

  // Writes the next run of whole lines; call when poll() reported POLLOUT. Returns false once the
  // reader is gone (EPIPE) or the stream failed: the sink is then broken and drops everything.
  bool WriteSome();

  bool broken() const { return broken_; }

  // Drops what is queued, as when the job ends without waiting for a stuck reader.
  void Discard();

 private:
  // Writes [sent_, end) in full, waiting for room where the stream is non-blocking.
  bool WriteRange(size_t end);

  int fd_;
  size_t chunk_bytes_;  // how much one write may carry without blocking (after POLLOUT)
  std::string queue_;
  size_t sent_ = 0;
  bool broken_ = false;
};

}  // namespace weft::launcher
