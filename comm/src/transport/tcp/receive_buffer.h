// ReceiveBuffer: the bytes a stream has read from its socket but not yet delivered.
//
// Reading ahead into it lets one recv() bring in many small messages (headers included) at once,
// and it is the staging area of reducing receives, which combine whole elements from here into
// the destination and keep a trailing partial element for the next read. Large copying receives
// bypass it and read straight into the destination.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace weft::tcp {

class ReceiveBuffer {
 public:
  // 256 KiB: large enough that a reducing receive makes few system calls, small enough to stay
  // in L2 while it is reduced.
  static constexpr size_t kCapacity = 256 << 10;

  // Unread bytes; the start is 16-byte aligned right after Compact().
  const char* data() const { return memory_.get() + begin_; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }

  void Consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }

  // Where the next read may put up to `*room` bytes (never 0 while fewer than kCapacity / 4
  // bytes are unread). Allocates on first use, since most streams of a link never see striped
  // traffic, and compacts when the free room at the end runs short.
  char* Tail(size_t* room) {
    if (memory_ == nullptr) memory_ = std::make_unique_for_overwrite<char[]>(kCapacity);
    if (begin_ > 0 && kCapacity - end_ < kCapacity / 4) Compact();
    *room = kCapacity - end_;
    return memory_.get() + end_;
  }
  void Commit(size_t n) { end_ += n; }

  // Moves the unread bytes to the start of the buffer, which is aligned for any element type.
  void Compact() {
    if (begin_ == 0) return;
    std::memmove(memory_.get(), memory_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }

 private:
  std::unique_ptr<char[]> memory_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace weft::tcp
