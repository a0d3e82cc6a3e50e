#include "transport/shm/streaming_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace weft {

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
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void StreamingCopyDone() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace weft
