// Checkpoints of a training run: where they live, what their metadata holds, and whether one fits
// the model. The tensors are sharded checkpoints (weft/shard/checkpoint.h): every rank writes its
// own slices and rank 0 the manifest last, so any layout can load what any other saved.
//
// Layout: every invocation without --resume starts a new run in DIR/checkpoints/run-NNN (the next
// free number), holding one directory ckpt-<step> per checkpoint and a `latest` pointer naming the
// newest. `--resume auto` continues the newest run (the highest NNN) and writes into it. Runs never
// touch each other's files: pruning keeps the newest `keep` checkpoints of the run's own directory,
// so a fresh run into a used DIR cannot lose its checkpoints to an older run's higher steps.
//
// A checkpoint directory exists only complete (it is renamed into place after its manifest is
// written), and `latest` is replaced atomically after it, so a crash leaves the previous
// checkpoint valid; the *.tmp entries such a crash leaves are removed when the run is opened
// again. Resume looks at every checkpoint (newest first), not only at `latest`, and verifies each
// file's checksum before using one: a truncated or corrupted checkpoint is skipped, naming why.
//
// The manifest's metadata: the step, the data cursor, the sampling RNG, the optimizer's step
// count, the config and the world layout that saved it (ranks, tensor-parallel and pipeline
// degrees, ZeRO stage, shard group), and fp16's loss-scaler state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "param_layout.h"
#include "weft/comm/json.h"
#include "weft/shard/checkpoint.h"

namespace weft::trainer {

// The arrays of a trainer checkpoint, in file order.
inline const std::vector<std::string> kCheckpointArrays = {"params", "adam_m", "adam_v"};

struct CheckpointMeta {
  int64_t step = 0;          // optimizer steps completed
  uint64_t data_cursor = 0;  // index of the next training sample
  uint64_t sample_rng = 0;   // state of the text-generation RNG
  int64_t optimizer_step = 0;
  std::string config_json;  // the config that saved it (ToJson)
  int ranks = 1;            // the layout that saved it, for the record
  int tp = 1;
  int pp = 1;
  int zero = 0;
  int shard_group = 0;
  // fp16's loss scaler (loss_scaler.h); scale 0: none saved.
  double loss_scale = 0;
  int64_t loss_scale_clean_steps = 0;
  int64_t loss_scale_skipped = 0;
};

// The metadata object of a checkpoint's manifest, and back. Errors name the missing field.
std::string MetaJson(const CheckpointMeta& meta);
absl::StatusOr<CheckpointMeta> ParseMeta(const JsonValue& metadata);

// The tensors of `layout` as a checkpoint names them (whole shapes, every tensor f32), in layout
// order.
std::vector<shard::TensorInfo> TensorTable(const ParamLayout& layout);

// OK if a checkpoint holding `saved` can be loaded into a model with `layout` (tensors are found
// by name); otherwise FailedPrecondition naming each difference: tensors missing from either
// side, shapes ("h.0.mlp.fc.w: checkpoint [128,32], model [256,32]") and dtypes.
absl::Status CheckLayout(const std::vector<shard::TensorInfo>& saved, const ParamLayout& layout);

// DIR/checkpoints/run-NNN.
std::string RunDir(const std::string& out_dir, int run);

// Picks and creates this invocation's run directory under DIR/checkpoints and returns its
// number: with `resume`, the newest run (its stale *.tmp entries removed), else, or when there is
// none, the next free number.
absl::StatusOr<int> OpenRun(const std::string& out_dir, bool resume);

// RUN_DIR/ckpt-<step>, the checkpoint of `step`.
std::string CheckpointPath(const std::string& run_dir, int64_t step);
// The steps of the checkpoints under RUN_DIR, newest first.
std::vector<int64_t> CheckpointSteps(const std::string& run_dir);
// After the checkpoint of `step` is saved: points RUN_DIR/latest at it, then removes all but the
// newest `keep` checkpoints of RUN_DIR.
absl::Status CommitLatest(const std::string& run_dir, int64_t step, int keep);

}  // namespace weft::trainer
