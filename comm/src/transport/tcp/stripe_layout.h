// How one message's payload is spread over the streams of a link.
//
// Messages below kStripeThresholdBytes travel whole on stream 0, right behind their header, so
// small-message latency is one socket's. Larger payloads are cut into kStripeChunkBytes chunks
// dealt round-robin: chunk i goes on stream i % nstreams. Both ends compute the same layout from
// the payload size and the link's stream count, so chunks carry no headers of their own, and
// each stream is a plain byte sequence: the concatenation of its shares of successive messages.
//
// A stream's "share" of a message is the bytes of the chunks it carries, in order; a position in
// the share maps to a message offset and to how many bytes are contiguous from there.
#pragma once

#include <algorithm>
#include <cstddef>

namespace weft::tcp {

inline constexpr size_t kStripeThresholdBytes = 256 << 10;
// A multiple of every element size, so reductions never see an element cut between streams.
inline constexpr size_t kStripeChunkBytes = 128 << 10;

class StripeLayout {
 public:
  StripeLayout() = default;
  StripeLayout(size_t bytes, int nstreams)
      : bytes_(bytes), nstreams_(bytes >= kStripeThresholdBytes && nstreams > 1 ? nstreams : 1) {}

  bool striped() const { return nstreams_ > 1; }

  // Payload bytes carried by `stream`.
  size_t ShareBytes(int stream) const {
    if (!striped()) return stream == 0 ? bytes_ : 0;
    const size_t s = static_cast<size_t>(stream);
    const size_t n = static_cast<size_t>(nstreams_);
    const size_t chunks = (bytes_ + kStripeChunkBytes - 1) / kStripeChunkBytes;
    if (s >= chunks) return 0;
    const size_t mine = (chunks - 1 - s) / n + 1;
    size_t share = mine * kStripeChunkBytes;
    if ((chunks - 1) % n == s) share -= chunks * kStripeChunkBytes - bytes_;  // short last chunk
    return share;
  }

  struct Span {
    size_t offset;  // in the message
    size_t length;  // contiguous bytes of the share from there
  };

  // Where byte `position` (< ShareBytes(stream)) of `stream`'s share lies in the message.
  Span Locate(int stream, size_t position) const {
    if (!striped()) return Span{position, bytes_ - position};
    const size_t chunk = (position / kStripeChunkBytes) * static_cast<size_t>(nstreams_) +
                         static_cast<size_t>(stream);
    const size_t within = position % kStripeChunkBytes;
    const size_t start = chunk * kStripeChunkBytes;
    return Span{start + within, std::min(kStripeChunkBytes, bytes_ - start) - within};
  }

 private:
  size_t bytes_ = 0;
  int nstreams_ = 1;
};

}  // namespace weft::tcp
