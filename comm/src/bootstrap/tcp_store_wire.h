// What the TCP store's server and client must agree on: the frame encoding, the protocol version
// and the socket helpers both sides use. Internal to the store; tcp_store.h says what each request
// means (caps, waits, when the server closes a connection).
//
// Framing: each direction is a byte stream of frames, a u32 body length then the body. Every
// integer on the wire is little-endian whatever the host's order, written and read byte by byte
// by the codecs below. A request body starts with a u8 command:
//   'H' hello: u32 protocol version, then the token (the only command allowed first, and only once)
//   'S' set:   u32 key length, key, then the value (the rest of the body)
//   'G' get:   u32 wait in ms, then the key (the rest of the body)
//   'A' add:   i64 delta (two's complement, sent as a u64), then the key
//   'W' wake:  nothing else; only the exact frame {1, 0, 0, 0, 'W'} counts as one
// A reply body starts with a u8 status: 'O' ok (alone, or then a get's value or an add's i64 sum),
// 'T' not yet (a get's wait ended), 'E' refused (then a message), 'V' wrong version (then the
// server's u32 version). No body is empty. Wake is never answered; every other request gets
// exactly one reply, in order.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::tcp_store_wire {

// The client's hello and the server's 'V' reply carry it; a hello with any other is refused.
inline constexpr uint32_t kProtocolVersion = 1;

// The codecs are defined here so the server's per-frame checks stay inlined.
inline void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

inline void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// `p` must hold at least 4 (LoadU32) or 8 (LoadU64) readable bytes.
inline uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

inline uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// strerror text of `err`, for error messages.
std::string ErrnoText(int err);

// "host:port", with an IPv6 host in brackets so the port stays unambiguous.
std::string HostPort(absl::string_view host, int port);

// Turns off Nagle's algorithm on a store socket: requests are small and each waits for its reply.
void SetNoDelay(int fd);

}  // namespace weft::tcp_store_wire
