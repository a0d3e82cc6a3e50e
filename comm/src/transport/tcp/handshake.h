// The handshake that opens every TCP stream between two ranks.
//
// The connecting (lower) rank sends a hello; the listening rank checks it and answers with an ack
// that accepts or says why not. Listeners are reachable by anything on the network, so the
// acceptor trusts nothing until the hello checks out: the magic, the sizes, the job token, the
// communicator's unique name, and that the ranks and stream index are ones it waits for.
//
// Wire format (little-endian, the byte order of every host Weft runs on):
//   hello: u32 magic, u32 version, i32 from_rank, i32 to_rank, u32 stream, u32 nstreams,
//          u32 token_bytes, u32 name_bytes, token, unique name
//   ack:   u32 magic, u32 AckCode
// The eight fixed hello fields keep their offsets in every version, so any version can read the
// sizes and answer kBadVersion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::tcp {

inline constexpr uint32_t kHandshakeVersion = 1;
inline constexpr size_t kHelloFixedBytes = 32;
inline constexpr size_t kAckBytes = 8;
// Far above any real token or name; a hello announcing more is garbage.
inline constexpr size_t kMaxHelloStringBytes = 4096;

struct Hello {
  uint32_t version = kHandshakeVersion;
  int32_t from_rank = 0;
  int32_t to_rank = 0;
  uint32_t stream = 0;
  uint32_t nstreams = 1;
  std::string token;
  std::string unique_name;
};

std::string EncodeHello(const Hello& hello);

// The size of the whole hello that starts with `fixed` (kHelloFixedBytes long), or nullopt when
// `fixed` is not the start of a hello (wrong magic, absurd string sizes).
std::optional<size_t> HelloSize(absl::string_view fixed);

// Decodes a whole hello whose start HelloSize() accepted.
Hello DecodeHello(absl::string_view bytes);

enum class AckCode : uint32_t {
  kAccepted = 0,
  kBadVersion = 1,
  kWrongToken = 2,
  kWrongCommunicator = 3,
  kUnexpectedRank = 4,
  kBadStream = 5,
  kDuplicateStream = 6,
};

std::string EncodeAck(AckCode code);

// The code of an ack (kAckBytes long), or nullopt when it is not an ack.
std::optional<AckCode> DecodeAck(absl::string_view bytes);

// "the job token differs", ...: why a listener refused, for the connector's error message.
const char* Describe(AckCode code);

}  // namespace weft::tcp
