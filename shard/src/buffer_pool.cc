#include "weft/shard/buffer_pool.h"

#include <algorithm>
#include <utility>

namespace weft::shard {

float* BufferPool::Take(size_t count, bool zeroed) {
  std::unique_ptr<float[]> buffer;
  if (auto it = free_.find(count); it != free_.end()) {
    buffer = std::move(it->second);
    free_.erase(it);
  } else {
    buffer = std::make_unique_for_overwrite<float[]>(count);
  }
  if (zeroed) std::fill_n(buffer.get(), count, 0.0f);
  float* raw = buffer.get();
  out_.emplace_back(count, std::move(buffer));
  live_bytes_ += count * sizeof(float);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return raw;
}

void BufferPool::Give(float* buffer, size_t count) {
  const auto it = std::find_if(out_.begin(), out_.end(),
                               [&](const auto& entry) { return entry.second.get() == buffer; });
  if (it == out_.end()) return;
  free_.emplace(count, std::move(it->second));
  out_.erase(it);
  live_bytes_ -= count * sizeof(float);
}

}  // namespace weft::shard
