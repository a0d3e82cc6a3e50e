// AlignedBuffer: zeroed bytes whose start and size are multiples of kIoAlignment, the alignment
// O_DIRECT asks of a buffer, a file offset and a transfer length.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

namespace weft::offload {

// 4 KiB: a multiple of every logical block size Linux disks report, and a page.
inline constexpr size_t kIoAlignment = 4096;

// `n` rounded up to a multiple of kIoAlignment.
inline constexpr size_t AlignUp(size_t n) {
  return (n + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `bytes` rounded up to a multiple of kIoAlignment, all zero.
  explicit AlignedBuffer(size_t bytes)
      : size_(AlignUp(bytes)),
        data_(size_ == 0 ? nullptr
                         : static_cast<std::byte*>(
                               ::operator new (size_, std::align_val_t{kIoAlignment}))) {
    if (size_ > 0) std::memset(data_.get(), 0, size_);
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{kIoAlignment}); }
  };
  size_t size_ = 0;
  std::unique_ptr<std::byte, Free> data_;
};

}  // namespace weft::offload
