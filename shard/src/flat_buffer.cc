#include "weft/shard/flat_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

namespace weft::shard {
namespace {

constexpr size_t kPageBytes = 4096;

}  // namespace

FlatBuffer::FlatBuffer(size_t size) : size_(size) {
  if (size == 0) return;
  mapped_bytes_ = (size * sizeof(float) + kPageBytes - 1) / kPageBytes * kPageBytes;
  void* p =
      mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<float*>(p);
}

FlatBuffer::~FlatBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_bytes_);
}

FlatBuffer::FlatBuffer(FlatBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

FlatBuffer& FlatBuffer::operator=(FlatBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void FlatBuffer::Release(size_t begin, size_t count) {
  const size_t first = (begin + kPageFloats - 1) / kPageFloats;  // pages wholly inside
  const size_t last = (begin + count) / kPageFloats;
  if (first >= last) return;
  madvise(reinterpret_cast<char*>(data_) + first * kPageBytes, (last - first) * kPageBytes,
          MADV_DONTNEED);
}

size_t FlatBuffer::Resident(size_t begin, size_t count) const {
  if (count == 0) return 0;
  const size_t first = begin / kPageFloats;
  const size_t last = (begin + count + kPageFloats - 1) / kPageFloats;
  std::vector<unsigned char> resident(last - first);
  if (mincore(reinterpret_cast<char*>(data_) + first * kPageBytes, (last - first) * kPageBytes,
              resident.data()) != 0) {
    return 0;
  }
  size_t floats = 0;
  for (size_t page = first; page < last; ++page) {
    if ((resident[page - first] & 1) == 0) continue;
    const size_t lo = std::max(begin, page * kPageFloats);
    const size_t hi = std::min(begin + count, (page + 1) * kPageFloats);
    floats += hi - lo;
  }
  return floats;
}

}  // namespace weft::shard
