#include "transport/shm/streaming_copy.h"

#include <cstdint>
#include <cstring>

#include "weft/kernels/reduce.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace weft {
namespace {

#if defined(__SSE2__)
constexpr size_t kPage = 4096;
// From this size on the source is mostly in DRAM (see InterleavedLines).
constexpr size_t kInterleavedBytes = size_t{1} << 20;

// Copies one 64-byte line, `d` aligned, with non-temporal stores; when kKeep, also to `kept`
// with ordinary ones.
template <bool kKeep>
inline void StreamLine(char* d, char* kept, const char* s) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
  const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
  if constexpr (kKeep) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(kept), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(kept + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(kept + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(kept + 48), e);
  }
  _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
  _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
}

// Copies whole groups of four pages, a line of each in turn, and returns the bytes copied. The
// hardware prefetchers stop at page boundaries and follow one stream per page: four at once
// keep more reads from DRAM in flight. Out of the cache, line after line is faster, so small
// copies stay so. AMD's cores lose their write-combining when non-temporal stores alternate
// between pages, so only Intel's take this path.
template <bool kKeep>
size_t InterleavedLines(char* d, char* kept, const char* s, size_t bytes) {
  const size_t groups = bytes / (4 * kPage);
  for (size_t g = 0; g < groups; ++g, d += 4 * kPage, s += 4 * kPage) {
    for (size_t at = 0; at < kPage; at += 64) {
      for (size_t page = 0; page < 4 * kPage; page += kPage) {
        _mm_prefetch(s + page + at + 256, _MM_HINT_T0);
        StreamLine<kKeep>(d + page + at, kKeep ? kept + page + at : nullptr, s + page + at);
      }
    }
    if constexpr (kKeep) kept += 4 * kPage;
  }
  return groups * 4 * kPage;
}

bool InterleavingPays() {
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
}

// StreamingCopy, and StreamingCopyKeeping when kKeep.
template <bool kKeep>
void Copy(char* d, char* kept, const char* s, size_t bytes, bool from_dram) {
  // Stream whole, aligned lines only; the partial lines at either end go through the cache.
  const size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
  const size_t plain = bytes < head + 64 ? bytes : head;
  std::memcpy(d, s, plain);
  if constexpr (kKeep) std::memcpy(kept, s, plain);
  if (plain == bytes) return;
  d += head;
  s += head;
  bytes -= head;
  if constexpr (kKeep) kept += head;
  if (from_dram && InterleavingPays()) {
    const size_t done = InterleavedLines<kKeep>(d, kept, s, bytes);
    d += done;
    s += done;
    bytes -= done;
    if constexpr (kKeep) kept += done;
  }
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    StreamLine<kKeep>(d, kept, s);
    if constexpr (kKeep) kept += 64;
  }
  std::memcpy(d, s, bytes);
  if constexpr (kKeep) std::memcpy(kept, s, bytes);
}
#endif

}  // namespace

void StreamingCopy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  Copy<false>(static_cast<char*>(dst), nullptr, static_cast<const char*>(src), bytes,
              bytes >= kInterleavedBytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void StreamingCopyKeeping(void* dst, void* kept, const void* src, size_t bytes,
                          bool source_in_dram) {
#if defined(__SSE2__)
  Copy<true>(static_cast<char*>(dst), static_cast<char*>(kept), static_cast<const char*>(src),
             bytes, source_in_dram);
#else
  std::memcpy(dst, src, bytes);
  std::memcpy(kept, src, bytes);
  static_cast<void>(source_in_dram);
#endif
}

bool StreamsOutput(size_t host_bytes) { return host_bytes >= StreamingThresholdBytes(); }

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
