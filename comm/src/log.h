// Diagnostics on stderr, enabled by WEFT_DEBUG=WARN|INFO|TRACE (like NCCL_DEBUG).
//
// Off by default: a library must not chatter. Read once; lines are written whole so ranks that
// share a terminal do not interleave within a line.
#pragma once

#include "absl/strings/string_view.h"

namespace weft {

enum class DebugLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

bool DebugEnabled(DebugLevel level);
void DebugLog(DebugLevel level, absl::string_view message);

}  // namespace weft
