#include "transport/tcp/handshake.h"

#include <cstring>

namespace weft::tcp {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

constexpr uint32_t kHelloMagic = 0x31484657;  // "WFH1"
constexpr uint32_t kAckMagic = 0x31414657;    // "WFA1"

void Put32(std::string* out, uint32_t value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

uint32_t Get32(absl::string_view bytes, size_t offset) {
  uint32_t value;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

}  // namespace

std::string EncodeHello(const Hello& hello) {
  std::string out;
  out.reserve(kHelloFixedBytes + hello.token.size() + hello.unique_name.size());
  Put32(&out, kHelloMagic);
  Put32(&out, hello.version);
  Put32(&out, static_cast<uint32_t>(hello.from_rank));
  Put32(&out, static_cast<uint32_t>(hello.to_rank));
  Put32(&out, hello.stream);
  Put32(&out, hello.nstreams);
  Put32(&out, static_cast<uint32_t>(hello.token.size()));
  Put32(&out, static_cast<uint32_t>(hello.unique_name.size()));
  out += hello.token;
  out += hello.unique_name;
  return out;
}

std::optional<size_t> HelloSize(absl::string_view fixed) {
  if (fixed.size() < kHelloFixedBytes || Get32(fixed, 0) != kHelloMagic) return std::nullopt;
  const uint32_t token_bytes = Get32(fixed, 24);
  const uint32_t name_bytes = Get32(fixed, 28);
  if (token_bytes > kMaxHelloStringBytes || name_bytes > kMaxHelloStringBytes) {
    return std::nullopt;
  }
  return kHelloFixedBytes + token_bytes + name_bytes;
}

Hello DecodeHello(absl::string_view bytes) {
  Hello hello;
  hello.version = Get32(bytes, 4);
  hello.from_rank = static_cast<int32_t>(Get32(bytes, 8));
  hello.to_rank = static_cast<int32_t>(Get32(bytes, 12));
  hello.stream = Get32(bytes, 16);
  hello.nstreams = Get32(bytes, 20);
  const uint32_t token_bytes = Get32(bytes, 24);
  const uint32_t name_bytes = Get32(bytes, 28);
  hello.token = std::string(bytes.substr(kHelloFixedBytes, token_bytes));
  hello.unique_name = std::string(bytes.substr(kHelloFixedBytes + token_bytes, name_bytes));
  return hello;
}

std::string EncodeAck(AckCode code) {
  std::string out;
  Put32(&out, kAckMagic);
  Put32(&out, static_cast<uint32_t>(code));
  return out;
}

std::optional<AckCode> DecodeAck(absl::string_view bytes) {
  if (bytes.size() != kAckBytes || Get32(bytes, 0) != kAckMagic) return std::nullopt;
  const uint32_t code = Get32(bytes, 4);
  if (code > static_cast<uint32_t>(AckCode::kDuplicateStream)) return std::nullopt;
  return static_cast<AckCode>(code);
}

const char* Describe(AckCode code) {
  switch (code) {
    case AckCode::kAccepted:
      return "accepted";
    case AckCode::kBadVersion:
      return "the listener speaks another handshake version";
    case AckCode::kWrongToken:
      return "the listener belongs to a job with another token";
    case AckCode::kWrongCommunicator:
      return "the listener belongs to another communicator";
    case AckCode::kUnexpectedRank:
      return "the listener does not expect this rank";
    case AckCode::kBadStream:
      return "the listener rejected the stream index or count";
    case AckCode::kDuplicateStream:
      return "the listener already has this stream";
  }
  return "unknown reason";
}

}  // namespace weft::tcp
