// A message header as it arrives from a peer (TCP frame header, shared-memory slot header): every
// field may hold any value, and the receiver describes it in its mismatch error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "transport/link.h"
#include "transport/tcp/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::tcp::FrameHeader got;
  if (size < sizeof(got)) return 0;
  std::memcpy(&got, data, sizeof(got));
  const std::string text = weft::DescribeEnvelope(got.envelope);
  FUZZ_CHECK(!text.empty());
  weft::Envelope expected;
  expected.kind = 1;
  expected.count = 1024;
  const absl::Status mismatch = weft::EnvelopeMismatch(expected, 4096, got.envelope, got.bytes);
  FUZZ_CHECK(!mismatch.ok());
  return 0;
}
