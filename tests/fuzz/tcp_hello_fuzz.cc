// The first bytes a TCP transport listener reads from anyone who connects: the hello
// (HelloSize, DecodeHello) and, on the connecting side, the ack (DecodeAck).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "transport/tcp/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::tcp;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= kAckBytes) {
    if (std::optional<AckCode> ack = DecodeAck(bytes.substr(0, kAckBytes))) {
      FUZZ_CHECK(DecodeAck(EncodeAck(*ack)) == ack);
      FUZZ_CHECK(Describe(*ack) != nullptr);
    }
  }
  if (bytes.size() < kHelloFixedBytes) return 0;
  std::optional<size_t> whole = HelloSize(bytes.substr(0, kHelloFixedBytes));
  if (!whole) return 0;
  FUZZ_CHECK(*whole >= kHelloFixedBytes);
  FUZZ_CHECK(*whole <= kHelloFixedBytes + 2 * kMaxHelloStringBytes);
  if (*whole > bytes.size()) return 0;  // a listener waits for the rest (bounded by its deadline)
  const Hello hello = DecodeHello(bytes.substr(0, *whole));
  const std::string encoded = EncodeHello(hello);
  FUZZ_CHECK(HelloSize(encoded.substr(0, kHelloFixedBytes)) == encoded.size());
  const Hello again = DecodeHello(encoded);
  FUZZ_CHECK(again.token == hello.token && again.unique_name == hello.unique_name &&
             again.from_rank == hello.from_rank && again.to_rank == hello.to_rank &&
             again.stream == hello.stream && again.nstreams == hello.nstreams);
  return 0;
}
