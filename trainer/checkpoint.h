// Checkpoints: the complete state of a run, written atomically and verified on load.
//
// Layout under DIR/checkpoints: ckpt-<step>.bin files and a `latest` pointer naming the newest.
// A write goes to a temporary file, is fsynced, renamed into place (and the directory fsynced),
// and only then is `latest` replaced the same way, so a crash leaves either the old or the new
// checkpoint, never half of one. Each file carries a checksum of its payload; loading verifies
// magic, version, size and checksum, so a truncated or corrupted file is detected and the next
// older one is used. Resume looks at every ckpt file (newest first), not only at `latest`: a crash
// between the rename and the pointer update loses nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft::trainer {

struct CheckpointState {
  int64_t step = 0;          // optimizer steps completed
  uint64_t data_cursor = 0;  // index of the next training sample
  uint64_t sample_rng = 0;   // state of the text-generation RNG
  int64_t optimizer_step = 0;
  std::string config_json;
  std::vector<float> params, adam_m, adam_v;
};

// Writes DIR/checkpoints/ckpt-<step>.bin and points `latest` at it; then removes all but the
// newest `keep` checkpoints.
absl::Status WriteCheckpoint(const std::string& dir, const CheckpointState& state, int keep);

// Reads and verifies one checkpoint file.
absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path);

// The newest checkpoint under DIR that verifies, or nullopt if there is none at all. Every
// rejected file is described in `rejected` (path and why) so the caller can report it.
std::optional<CheckpointState> LoadNewestValid(const std::string& dir,
                                               std::vector<std::string>* rejected,
                                               std::string* loaded_path);

// Path of the checkpoint for `step` under DIR.
std::string CheckpointPath(const std::string& dir, int64_t step);

}  // namespace weft::trainer
