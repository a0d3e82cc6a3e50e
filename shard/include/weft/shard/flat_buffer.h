// FlatBuffer: a float buffer that costs memory only where it has been written, and whose pages
// can be handed back to the kernel range by range.
//
// A model's flat parameter and gradient buffers are FlatBuffers: under ZeRO-2 the full gradients,
// and under ZeRO-3 the full parameters, live elsewhere (pooled per unit), so those buffers stay
// address space that was never touched, or that was given back after a one-off use (the initial
// parameters, before ZeRO-3 keeps only its slices). Release(range) gives whole pages back
// (madvise MADV_DONTNEED on a private anonymous mapping): the range then reads as zeros and costs
// nothing until written again. The buffer starts page-aligned and zero; the pages a range shares
// with its neighbours at either end stay resident (and keep their values).
#pragma once

#include <cstddef>

namespace weft::shard {

class FlatBuffer {
 public:
  // Floats per page.
  static constexpr size_t kPageFloats = 4096 / sizeof(float);

  FlatBuffer() = default;
  explicit FlatBuffer(size_t size);
  ~FlatBuffer();
  FlatBuffer(FlatBuffer&& other) noexcept;
  FlatBuffer& operator=(FlatBuffer&& other) noexcept;
  FlatBuffer(const FlatBuffer&) = delete;
  FlatBuffer& operator=(const FlatBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }

  // Gives the whole pages inside [begin, begin + count) back; they read as zeros afterwards.
  void Release(size_t begin, size_t count);
  // Floats of [begin, begin + count) on resident pages (mincore): what the range costs now.
  size_t Resident(size_t begin, size_t count) const;

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;
};

}  // namespace weft::shard
