// JSON string literals for the JSON that Weft writes: flight-recorder dumps (comm), weft-trace's
// Chrome traces (tools) and the perf tools' reports (bench). One quoting rule for all of them, so
// whatever one writes the others' readers accept.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace weft {

// `text` as a JSON string literal, quotes included: '"' and '\' escaped, newline and tab as \n and
// \t, other control characters as \u00XX. Bytes >= 0x80 pass through (UTF-8 stays UTF-8).
std::string JsonQuote(absl::string_view text);

}  // namespace weft
