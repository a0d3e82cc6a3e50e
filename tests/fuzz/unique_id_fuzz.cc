// The unique id a user hands to every rank (ParseUniqueId): anything accepted must format back
// to an id that parses to the same thing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/unique_id.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<weft::ParsedUniqueId> parsed = weft::ParseUniqueId(text);
  if (!parsed.ok()) return 0;
  absl::StatusOr<weft::ParsedUniqueId> again = weft::ParseUniqueId(weft::FormatUniqueId(*parsed));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->host == parsed->host && again->port == parsed->port &&
             again->token == parsed->token);
  return 0;
}
