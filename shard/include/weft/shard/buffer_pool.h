// BufferPool: float buffers handed out and taken back by size, kept for reuse.
//
// ZeRO-2 and -3 need a unit's full gradient, or its gathered parameters, only while the unit is in
// use. Allocating and freeing them each time would make the kernel map fresh pages on every use
// (page faults cost more than the copies on a VM); a pool keeps the few sizes a model has (one per
// kind of unit) resident and hands them out again. live_bytes() is what is handed out now, and
// peak_bytes() the most ever at once: the memory the pool's users actually hold.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

namespace weft::shard {

class BufferPool {
 public:
  // A buffer of `count` floats, all zero when `zeroed`. Stays valid until Give.
  float* Take(size_t count, bool zeroed);
  // Returns a buffer Take gave out with the same count.
  void Give(float* buffer, size_t count);

  size_t live_bytes() const { return live_bytes_; }
  size_t peak_bytes() const { return peak_bytes_; }

 private:
  std::multimap<size_t, std::unique_ptr<float[]>> free_;  // by count
  std::vector<std::pair<size_t, std::unique_ptr<float[]>>> out_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace weft::shard
