// weft-trace's input: a flight-recorder dump (JSON) that may be truncated, edited or not a dump
// at all. Whatever parses must survive the analysis, and the Chrome trace it writes must be JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis.h"
#include "dump.h"
#include "fuzz_check.h"
#include "weft/comm/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)weft::ParseJson(text);
  absl::StatusOr<weft::trace::RankDump> dump = weft::trace::ParseDump(text, "fuzz");
  if (!dump.ok()) return 0;
  // Two copies: the second plays another rank of the same communicator.
  std::vector<weft::trace::RankDump> dumps = {*dump, *dump};
  dumps[1].rank = (dump->rank + 1) % dump->size;
  FUZZ_CHECK(!weft::trace::Diagnose(dumps).empty());
  FUZZ_CHECK(weft::ParseJson(weft::trace::ChromeTrace(dumps)).ok());
  return 0;
}
