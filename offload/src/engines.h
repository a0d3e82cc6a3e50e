// The two IoEngine implementations, for MakeIoEngine.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "weft/offload/io_engine.h"

namespace weft::offload::internal {

// An io_uring of `queue_depth` entries; the io_uring_queue_init error if the kernel refuses one.
absl::StatusOr<std::unique_ptr<IoEngine>> MakeUringEngine(int queue_depth);
// `threads` workers doing pread/pwrite; `why` (may be empty) says why io_uring is not in use.
std::unique_ptr<IoEngine> MakeThreadEngine(int threads, const std::string& why);

}  // namespace weft::offload::internal
