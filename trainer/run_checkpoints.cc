#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint.h"
#include "feedback_file.h"
#include "run.h"

namespace weft::trainer {

absl::Status Run::OpenCheckpointRun() {
  // Rank 0 picks (and creates) the run directory; the others learn its number through an
  // all-reduce (max, theirs 0), so every rank reads and writes the same run. 0: rank 0 failed.
  absl::StatusOr<int> opened =
      leader() ? OpenRun(options_.out_dir, options_.resume) : absl::StatusOr<int>(0);
  int64_t run = opened.ok() ? *opened : 0;
  if (group_.comm() != nullptr) {
    absl::Status s = group_.comm()
                         ->AllReduce(&run, &run, 1, DataType::kInt64, ReduceOp::kMax)
                         .Wait(kCommTimeout);
    if (!s.ok()) return s;
  }
  if (!opened.ok()) return opened.status();
  if (run == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", group_.rank(), ": rank 0 could not open a checkpoint run under ",
                     options_.out_dir));
  }
  run_dir_ = RunDir(options_.out_dir, static_cast<int>(run));
  if (leader()) {
    std::printf("checkpoints: %s\n", run_dir_.c_str());
    std::fflush(stdout);  // before any error on stderr
  }
  return options_.resume ? Resume() : absl::OkStatus();
}

absl::Status Run::Resume() {
  const int rank = group_.rank();
  // Every rank walks the same directory newest first, checks the manifest and its share of the
  // files' checksums, and all take the newest checkpoint that every rank accepted.
  for (int64_t step : CheckpointSteps(run_dir_)) {
    const std::string path = CheckpointPath(run_dir_, step);
    absl::StatusOr<std::unique_ptr<shard::CheckpointReader>> reader =
        shard::CheckpointReader::Open(path);
    absl::Status verdict = reader.status();
    if (verdict.ok()) verdict = (*reader)->Verify(rank, group_.size());
    // One all-reduce (max): the step's bounds, and the lowest rank that rejected it.
    int64_t votes[3] = {step, -step, verdict.ok() ? 0 : group_.size() - rank};
    if (group_.comm() != nullptr) {
      absl::Status s = group_.comm()
                           ->AllReduce(votes, votes, 3, DataType::kInt64, ReduceOp::kMax)
                           .Wait(kCommTimeout);
      if (!s.ok()) return s;
    }
    if (votes[0] != -votes[1]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank, ": resume: ranks found different checkpoints (steps ", -votes[1], " to ",
          votes[0], ") under ", run_dir_, "; every rank must see the same directory"));
    }
    if (votes[2] > 0) {
      if (rank == group_.size() - votes[2]) {
        std::printf("resume: skipping %s: %s; trying the previous checkpoint\n", path.c_str(),
                    std::string(verdict.message()).c_str());
        std::fflush(stdout);
      }
      continue;
    }
    return LoadCheckpoint(**reader);
  }
  if (leader()) std::printf("resume: no checkpoint in %s, starting fresh\n", run_dir_.c_str());
  return absl::OkStatus();
}

absl::Status Run::LoadCheckpoint(const shard::CheckpointReader& reader) {
  const std::string& path = reader.dir();
  absl::StatusOr<CheckpointMeta> meta = ParseMeta(reader.manifest().metadata);
  if (!meta.ok()) return absl::DataLossError(absl::StrCat(path, ": ", meta.status().message()));
  absl::StatusOr<Config> saved = ParseConfig(meta->config_json, path);
  if (!saved.ok()) return saved.status();
  // What must match to continue: the model (config and tensors) and the global batch, which fixes
  // the data order and the loss scale. The schedule, lr and parallel layout may change.
  std::string differences;
  const auto differ = [&](absl::string_view what) {
    absl::StrAppend(&differences, differences.empty() ? "" : "; ", what);
  };
  const std::pair<const char*, int Config::*> fixed[] = {
      {"n_layer", &Config::n_layer},       {"n_head", &Config::n_head},
      {"n_embd", &Config::n_embd},         {"seq_len", &Config::seq_len},
      {"batch_size", &Config::batch_size},
  };
  for (const auto& [name, field] : fixed) {
    if ((*saved).*field != config_.*field) {
      differ(absl::StrCat(name, ": checkpoint ", (*saved).*field, ", config ", config_.*field));
    }
  }
  std::vector<shard::TensorInfo> tensors;
  for (const shard::ManifestTensor& t : reader.manifest().tensors) tensors.push_back(t.info);
  if (absl::Status s = CheckLayout(tensors, Gpt::WholeLayout(config_.shape())); !s.ok()) {
    differ(s.message());
  }
  if (!differences.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("resume: checkpoint ", path, " does not fit this run: ", differences,
                     " (without --resume, a new run starts in its own directory)"));
  }
  if (absl::Status s = dp_->LoadCheckpoint(reader, meta->optimizer_step); !s.ok()) return s;
  if (config_.compression != "none") {
    // The same codec on the same ranks continues its error feedback exactly; otherwise it starts
    // from zero.
    if (saved->compression == config_.compression && meta->ranks == group_.size()) {
      absl::StatusOr<std::vector<float>> errors = ReadFeedback(FeedbackPath(path, group_.rank()));
      if (!errors.ok()) return errors.status();
      if (absl::Status s = dp_->RestoreCompressionErrors(*errors); !s.ok()) {
        return absl::DataLossError(absl::StrCat(path, ": ", s.message()));
      }
    } else if (leader()) {
      std::printf(
          "resume: compression=%s error feedback starts from zero (saved with %s on %d "
          "rank%s)\n",
          config_.compression.c_str(), saved->compression.c_str(), meta->ranks,
          meta->ranks == 1 ? "" : "s");
    }
  }
  sample_rng_ = Rng(meta->sample_rng);
  // A run resumed in fp16 continues the saved scaler (from another precision: the initial one).
  if (config_.precision == "fp16" && meta->loss_scale > 0) {
    scaler_.Restore({meta->loss_scale, meta->loss_scale_clean_steps, meta->loss_scale_skipped});
  }
  start_step_ = static_cast<int>(meta->step);
  if (meta->data_cursor != static_cast<uint64_t>(start_step_) * config_.batch_size) {
    return absl::DataLossError(absl::StrCat("resume: checkpoint ", path, " data cursor ",
                                            meta->data_cursor, " does not match step ", start_step_,
                                            " × batch ", config_.batch_size));
  }
  if (leader()) {
    std::printf("resume: continuing from %s (step %d, saved by %d rank%s, zero=%d)\n", path.c_str(),
                start_step_, meta->ranks, meta->ranks == 1 ? "" : "s", meta->zero);
  }
  return absl::OkStatus();
}

absl::Status Run::SaveCheckpoint(int step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.data_cursor = static_cast<uint64_t>(step) * config_.batch_size;
  meta.sample_rng = sample_rng_.state();
  meta.optimizer_step = dp_->optimizer_step();
  if (config_.precision == "fp16") {
    meta.loss_scale = scaler_.state().scale;
    meta.loss_scale_clean_steps = scaler_.state().clean_steps;
    meta.loss_scale_skipped = scaler_.state().skipped;
  }
  meta.config_json = ToJson(config_);
  meta.ranks = group_.size();
  meta.tp = config_.tp;
  meta.pp = config_.pp;
  meta.zero = config_.zero;
  meta.shard_group = config_.zero > 0
                         ? static_cast<int>(DataParallel::ShardGroup(config_, data_.comm()).size())
                         : 0;
  // The manifest lists the whole model's tensors; this rank's pieces name them by index there.
  const ParamLayout whole = Gpt::WholeLayout(config_.shape());
  if (absl::Status s = dp_->FetchOffloaded(); !s.ok()) return s;
  std::vector<shard::SavedPiece> pieces = dp_->CheckpointPieces();
  for (shard::SavedPiece& piece : pieces) {
    piece.tensor = whole.Find(model_->layout().tensor(piece.tensor).name);
  }
  const std::string path = CheckpointPath(run_dir_, step);
  // A checkpoint of this step exists only where resume rejected it: this one replaces it.
  if (leader()) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  absl::Status s = shard::SaveCheckpoint(group_.comm(), path, kCheckpointArrays, TensorTable(whole),
                                         std::move(pieces), MetaJson(meta), kCommTimeout);
  if (absl::Status released = dp_->ReleaseOffloaded(); s.ok()) s = released;
  if (s.ok() && config_.compression != "none") {
    // Every rank's own error feedback beside the tensors, all written before `latest` moves.
    s = WriteFeedback(FeedbackPath(path, group_.rank()), dp_->compression_errors());
    if (absl::Status b = group_.Barrier(); s.ok()) s = b;
  }
  if (!s.ok() || !leader()) return s;
  return CommitLatest(run_dir_, step, config_.keep_checkpoints);
}

}  // namespace weft::trainer
