#include "transport/shm/streaming_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace weft {
namespace {

#if defined(__SSE2__)
constexpr size_t kPage = 4096;
// From this size on the source is mostly in DRAM (see InterleavedLines).
constexpr size_t kInterleavedBytes = size_t{1} << 20;

// Copies one 64-byte line, `d` aligned, with non-temporal stores.
inline void StreamLine(char* d, const char* s) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
  const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
  _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
}

// Copies whole groups of four pages, a line of each in turn, and returns the bytes copied. The
// hardware prefetchers stop at page boundaries and follow one stream per page: four at once
// keep more reads from DRAM in flight. On this project's VM, copies of 1-256 MiB out of DRAM ran
// at 9.2-10.4 GB/s this way against 7.4-9.0 line after line; out of the cache, line after line
// is faster (18 against 13 GB/s), so small copies stay so.
size_t InterleavedLines(char* d, const char* s, size_t bytes) {
  const size_t groups = bytes / (4 * kPage);
  for (size_t g = 0; g < groups; ++g, d += 4 * kPage, s += 4 * kPage) {
    for (size_t at = 0; at < kPage; at += 64) {
      for (size_t page = 0; page < 4 * kPage; page += kPage) {
        _mm_prefetch(s + page + at + 256, _MM_HINT_T0);
        StreamLine(d + page + at, s + page + at);
      }
    }
  }
  return groups * 4 * kPage;
}
#endif

}  // namespace

void StreamingCopy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  // Stream whole, aligned lines only; the partial lines at either end go through the cache.
  const size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
  if (bytes < head + 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  if (bytes >= kInterleavedBytes) {
    const size_t done = InterleavedLines(d, s, bytes);
    d += done;
    s += done;
    bytes -= done;
  }
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) StreamLine(d, s);
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void CopyOut(bool stream, void* dst, const void* src, size_t bytes) {
  if (stream) {
    StreamingCopy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void StreamingCopyDone() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace weft
