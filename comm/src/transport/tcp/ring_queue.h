// RingQueue: the FIFO of in-flight operations of a link.
//
// A circular buffer that only grows (doubling), so a link in steady state queues and retires
// messages without touching the allocator, unlike std::deque, which allocates and frees a block
// every few hundred elements.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace weft::tcp {

template <typename T>
class RingQueue {
 public:
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

  // The i-th element from the front.
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void push_back(T value) {
    if (count_ == slots_.size()) Grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(value);
    ++count_;
  }

  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }

 private:
  void Grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // size is 0 or a power of two
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace weft::tcp
