// The header that precedes every message on a TCP link.
//
// Wire format (little-endian, 48 bytes): u32 magic, u32 flags, u64 payload bytes, then the
// 32-byte Envelope verbatim. The payload follows (spread over the link's streams when striped,
// see stripe_layout.h). A zero-byte message is a header alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/link.h"

namespace weft::tcp {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

inline constexpr uint32_t kFrameMagic = 0x4d464657;  // "WFFM"
// Set when the payload is striped over all streams; the receiver computes the same and a
// disagreement means the two ends are not running the same protocol.
inline constexpr uint32_t kFrameStriped = 1u << 0;
inline constexpr uint32_t kKnownFrameFlags = kFrameStriped;
// No message is this large (16 TiB); a header announcing more is corrupt.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 44;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t flags = 0;
  uint64_t bytes = 0;
  Envelope envelope;
};
static_assert(sizeof(FrameHeader) == 48, "FrameHeader is the wire format");

inline constexpr size_t kFrameHeaderBytes = sizeof(FrameHeader);

}  // namespace weft::tcp
