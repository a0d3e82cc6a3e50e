// A TCP listener record, read from the store (any process with the token could have written it).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "transport/tcp/listener_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<weft::tcp::ListenerRecord> record = weft::tcp::ParseListenerRecord(text);
  if (!record.ok()) return 0;
  absl::StatusOr<weft::tcp::ListenerRecord> again =
      weft::tcp::ParseListenerRecord(weft::tcp::FormatListenerRecord(*record));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->host_id == record->host_id);
  FUZZ_CHECK(again->addresses.size() == record->addresses.size());
  return 0;
}
