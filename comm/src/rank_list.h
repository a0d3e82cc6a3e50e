// Sets of ranks as people read them in error messages and diagnoses, shared by the fault watch
// (comm) and weft-trace (tools) so that a live failure and its post-mortem name ranks alike.
#pragma once

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace weft {

// "no rank", "rank 3", "ranks 0-2", "ranks 0, 2, 5-7": consecutive runs collapse to a range.
// `ranks` must be ascending.
std::string RankList(absl::Span<const int64_t> ranks);

}  // namespace weft
