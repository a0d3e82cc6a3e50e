// Page-aligned benchmark memory whose every page is written before any timing starts.
//
// Writing each page up front means no timed iteration pays for a page fault, and page alignment
// gives every row the same alignment (and the same head and tail handling in the kernels)
// whatever the allocator happened to return.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace weft::kernel_bench {

class PageBuffer {
 public:
  // `bytes` of zeroes; data() is null when the memory cannot be had.
  explicit PageBuffer(size_t bytes) {
    const long page_size = sysconf(_SC_PAGESIZE);
    const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
    const size_t rounded = (bytes + page - 1) / page * page;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(page, rounded)));
    if (data_ != nullptr) std::memset(data_.get(), 0, rounded);
  }

  std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> data_;
};

}  // namespace weft::kernel_bench
