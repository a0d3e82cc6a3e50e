// The error-feedback state of gradient compression in a checkpoint: one file per rank beside the
// sharded tensors (each rank's errors are its own, not shards of anything), checksummed.
//
// Layout: "weft-ef1" (8 bytes), the value count (uint64), Checksum64 of the values (uint64), then
// the values as fp32, little-endian. Written atomically (durable_file.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft::trainer {

// CHECKPOINT_DIR/compression-rank-RRRRR.bin.
std::string FeedbackPath(const std::string& checkpoint_dir, int rank);
absl::Status WriteFeedback(const std::string& path, const std::vector<float>& errors);
// NotFound when there is no file; DataLoss naming the path for a short, foreign or corrupt one.
absl::StatusOr<std::vector<float>> ReadFeedback(const std::string& path);

}  // namespace weft::trainer
