// Checkpoints: the complete state of a run, written atomically and verified on load.
//
// Layout: every invocation without --resume starts a new run in DIR/checkpoints/run-NNN (the next
// free number), holding ckpt-<step>.bin files and a `latest` pointer naming the newest.
// `--resume auto` continues the newest run (the highest NNN) and writes into it. Runs never touch
// each other's files: pruning keeps the newest `keep` checkpoints of the run's own directory, so a
// fresh run into a used DIR cannot lose its checkpoints to an older run's higher step numbers.
//
// A write goes to a temporary file, is fsynced, renamed into place (and the directory fsynced),
// and only then is `latest` replaced the same way, so a crash leaves either the old or the new
// checkpoint, never half of one; the *.tmp files such a crash leaves are removed when the run is
// opened again. Each file carries a checksum of its payload; loading verifies magic, version, size
// and checksum, so a truncated or corrupted file is detected and the next older one is used.
// Resume looks at every ckpt file (newest first), not only at `latest`: a crash between the rename
// and the pointer update loses nothing.
//
// A checkpoint describes what it holds: the config (JSON) and a tensor table (name, shape, offset
// and dtype of every parameter tensor), which CheckLayout compares with the model's ParamLayout on
// resume. The buffers are packed (ParamLayout::Pack: tensors back to back, no unit padding), so a
// checkpoint does not depend on the rank count or the ZeRO stage that wrote it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "param_layout.h"

namespace weft::trainer {

// One entry of a checkpoint's tensor table.
struct TensorRecord {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in elements, into params (and adam_m, adam_v: same layout)
  std::string dtype;    // "f32"
  bool operator==(const TensorRecord&) const = default;
};

struct CheckpointState {
  int64_t step = 0;          // optimizer steps completed
  uint64_t data_cursor = 0;  // index of the next training sample
  uint64_t sample_rng = 0;   // state of the text-generation RNG
  int64_t optimizer_step = 0;
  std::string config_json;
  std::vector<TensorRecord> tensors;
  std::vector<float> params, adam_m, adam_v;
};

// The tensor table of `layout`'s packed form (every tensor f32).
std::vector<TensorRecord> TensorTable(const ParamLayout& layout);

// OK if a checkpoint with tensor table `saved` can be loaded into a model with `layout`; otherwise
// FailedPrecondition naming each difference: tensors missing from either side, shapes
// ("h.0.mlp.fc.w: checkpoint [128,32], model [256,32]"), dtypes, and, when names and shapes
// agree, offsets ("tensor order differs: ...").
absl::Status CheckLayout(const std::vector<TensorRecord>& saved, const ParamLayout& layout);

// DIR/checkpoints/run-NNN.
std::string RunDir(const std::string& out_dir, int run);

// Picks and creates this invocation's run directory under DIR/checkpoints and returns its
// number: with `resume`, the newest run (its stale *.tmp files removed), else, or when there is
// none, the next free number.
absl::StatusOr<int> OpenRun(const std::string& out_dir, bool resume);

// Writes RUN_DIR/ckpt-<step>.bin and points RUN_DIR/latest at it; then removes all but the
// newest `keep` checkpoints of RUN_DIR.
absl::Status WriteCheckpoint(const std::string& run_dir, const CheckpointState& state, int keep);

// Reads and verifies one checkpoint file.
absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path);

// The newest checkpoint under RUN_DIR that verifies, or nullopt if there is none at all. Every
// rejected file is described in `rejected` (path and why) so the caller can report it.
std::optional<CheckpointState> LoadNewestValid(const std::string& run_dir,
                                               std::vector<std::string>* rejected,
                                               std::string* loaded_path);

// Path of the checkpoint for `step` under RUN_DIR.
std::string CheckpointPath(const std::string& run_dir, int64_t step);

}  // namespace weft::trainer
