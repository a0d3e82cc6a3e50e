// Sizes on nccl-tests' command lines: "8", "1K", "128M", "1.5G". The suffix (either case) scales
// by powers of two, as nccl-tests' parsesize does; fractions are allowed. Shared by the *_perf
// tools, the peer harnesses and the trainer's memory budget, so a size means the same bytes to
// all of them.
#pragma once

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace weft {

// Empty when `text` is not a non-negative size (or exceeds 9e18 bytes).
std::optional<size_t> ParseByteSize(absl::string_view text);

}  // namespace weft
