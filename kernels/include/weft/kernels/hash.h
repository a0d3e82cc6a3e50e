// Stable 64-bit hashes: the same value in every process, build and machine (absl::Hash is seeded
// per process and std::hash is implementation-defined), for what ranks compare with each other or
// files keep: object and key names, plan hashes, derived ports, checksums, per-element seeds.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// 64-bit FNV-1a over `n` bytes, continuing from `h` (so fields can be hashed one after another).
inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}
// The same over a string's characters (std::string, std::string_view, absl::string_view).
template <typename Text>
requires requires(const Text& t) {
  { t.data() } -> std::convertible_to<const char*>;
  { t.size() } -> std::convertible_to<size_t>;
}
inline uint64_t Fnv1a(const Text& text, uint64_t h = kFnvOffset) {
  return Fnv1a(static_cast<const void*>(text.data()), text.size(), h);
}

// SplitMix64's step and finalizer: every input bit moves every output bit, so consecutive inputs
// (counters, indices) give independent-looking outputs.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Checksum64 over data that arrives in pieces (a file written buffer by buffer): Add the pieces in
// order; Finish gives what Checksum64 gives over their concatenation.
class Checksum64Stream {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0 && tail_size_ > 0) {  // complete a word begun by an earlier piece
      tail_[tail_size_++] = *p++;
      --n;
      if (tail_size_ == 8) {
        Word(tail_);
        tail_size_ = 0;
      }
    }
    for (; n >= 8; p += 8, n -= 8) Word(p);
    if (n == 0) return;  // p may be null (an empty piece)
    std::memcpy(tail_, p, n);
    tail_size_ += n;
  }
  uint64_t Finish() const { return Fnv1a(tail_, tail_size_, h_); }

 private:
  void Word(const unsigned char* p) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h_ = (h_ ^ word) * kFnvPrime;
    h_ ^= h_ >> 29;
  }

  uint64_t h_ = kFnvOffset;
  unsigned char tail_[8] = {};
  size_t tail_size_ = 0;
};

// FNV-1a over 64-bit words (then the tail bytes), with a shift after each word so that high bits
// feed the low ones: detects torn or flipped data as byte-wise FNV does, at memory speed.
inline uint64_t Checksum64(const void* data, size_t n) {
  Checksum64Stream stream;
  stream.Add(data, n);
  return stream.Finish();
}

}  // namespace weft
