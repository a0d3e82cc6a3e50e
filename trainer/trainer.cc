#include "trainer.h"

#include <cblas.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "checkpoint.h"
#include "data.h"
#include "data_parallel.h"
#include "generate.h"
#include "mesh.h"
#include "model.h"
#include "optimizer.h"
#include "pipeline.h"
#include "plot.h"
#include "rng.h"

namespace weft::trainer {
namespace {

constexpr absl::Duration kCommTimeout = absl::Seconds(120);
constexpr float kSampleTemperature = 0.8f;

// The collectives the loop needs, with a single process as the trivial case.
class Group {
 public:
  explicit Group(Communicator* comm) : comm_(comm) {}
  int rank() const { return comm_ == nullptr ? 0 : comm_->rank(); }
  int size() const { return comm_ == nullptr ? 1 : comm_->size(); }
  Communicator* comm() const { return comm_; }

  // Sums `n` doubles over ranks in place; adds the time blocked to *waited.
  absl::Status SumDoubles(double* values, size_t n, absl::Duration* waited) const {
    if (comm_ == nullptr) return absl::OkStatus();
    const absl::Time start = absl::Now();
    absl::Status s =
        comm_->AllReduce(values, values, n, DataType::kFloat64, ReduceOp::kSum).Wait(kCommTimeout);
    *waited += absl::Now() - start;
    return s;
  }
  absl::Status Barrier() const {
    if (comm_ == nullptr) return absl::OkStatus();
    return comm_->Barrier().Wait(kCommTimeout);
  }

 private:
  Communicator* comm_;
};

// CPU seconds this process has used (all threads): on a shared machine, where wall time depends
// on the neighbours, CPU time per step measures the step's own cost.
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string FormatDuration(double seconds) {
  const int s = static_cast<int>(std::lround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// Keeps the metrics lines of steps up to `step` (a resumed run rewrites what came after).
absl::Status TruncateMetrics(const std::string& path, int step,
                             std::vector<std::pair<int, double>>* train,
                             std::vector<std::pair<int, double>>* val) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::vector<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    int s = 0;
    double loss = 0, val_loss = 0;
    if (std::sscanf(line.c_str(), "{\"step\": %d, \"loss\": %lf", &s, &loss) != 2) continue;
    if (s > step) continue;
    kept.push_back(line);
    train->emplace_back(s, loss);
    const size_t at = line.find("\"val_loss\": ");
    if (at != std::string::npos &&
        std::sscanf(line.c_str() + at, "\"val_loss\": %lf", &val_loss) == 1) {
      val->emplace_back(s, val_loss);
    }
  }
  in.close();
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& l : kept) out << l << "\n";
  if (!out) return absl::InternalError(absl::StrCat("cannot rewrite ", path));
  return absl::OkStatus();
}

class Run {
 public:
  Run(const Config& config, Communicator* comm, const TrainOptions& options)
      : config_(config),
        options_(options),
        group_(comm),
        micro_(config.micro_batch(group_.size())),
        sample_rng_(Mix64(config.seed ^ 0x5a3b1e)) {}

  absl::StatusOr<TrainSummary> Execute();

 private:
  bool leader() const { return group_.rank() == 0; }
  absl::Status Setup();
  absl::Status OpenCheckpointRun();
  absl::Status Resume();
  absl::Status LoadCheckpoint(const shard::CheckpointReader& reader);
  absl::Status Step(int step, double* loss, double* grad_norm, double* lr,
                    absl::Duration* comm_wait);
  // The sampler's view of the model, through the pipeline when there is one.
  NextLogits SampleLogits();
  // pp > 1: sums the loss over the stages and takes the pass's bubble and peak activations.
  absl::Status PipelineFigures(double* loss);
  // The activation bytes this rank keeps between forward and backward at most.
  size_t ActivationBytes() const;
  // state_bytes_ and buffer_bytes_: the most of any rank (collective).
  absl::Status UpdateMemoryFigures();
  absl::StatusOr<double> Evaluate(absl::Duration* comm_wait);
  absl::Status SaveCheckpoint(int step);

  const Config config_;
  const TrainOptions options_;
  const Group group_;  // every rank
  const int micro_;
  Mesh mesh_;
  Group data_{nullptr};  // this rank's data-parallel group
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<Pipeline> pipeline_;  // pp > 1
  std::unique_ptr<DataParallel> dp_;
  double bubble_fraction_ = 0;  // the last step's, the mean over the stages
  int64_t peak_activations_ =
      0;  // the last step's micro-batch × chunk activations, most of any stage
  int64_t activation_bytes_ = 0;  // the most any rank keeps for backward
  int64_t state_bytes_ = 0;       // the most any rank keeps between steps
  int64_t buffer_bytes_ = 0;      // the most any rank holds during a step (DataParallel)
  Rng sample_rng_;
  Corpus corpus_;
  std::vector<uint8_t> tokens_, targets_;
  int start_step_ = 0;
  std::string run_dir_;  // this invocation's DIR/checkpoints/run-NNN, the same on every rank
  std::ofstream metrics_;
  std::vector<std::pair<int, double>> train_curve_, val_curve_;
};

absl::Status Run::Setup() {
  openblas_set_num_threads(config_.threads);
  absl::StatusOr<Corpus> corpus = LoadCorpus(config_.data, config_.val_fraction, config_.seq_len);
  if (!corpus.ok()) return corpus.status();
  corpus_ = std::move(*corpus);
  tokens_.resize(static_cast<size_t>(micro_) * config_.seq_len);
  targets_.resize(tokens_.size());
  absl::StatusOr<Mesh> mesh = Mesh::Create(config_, group_.comm());
  if (!mesh.ok()) return mesh.status();
  mesh_ = *std::move(mesh);
  if (leader() && group_.size() > 1) std::printf("%s\n", mesh_.Describe().c_str());
  data_ = Group(mesh_.dp_comm());
  tp_ = std::make_unique<TensorParallel>(mesh_.tp_comm(), config_.sequence_parallel == "true",
                                         kCommTimeout);
  StagePart part;
  PipeSchedule schedule;
  if (config_.pp > 1) {
    const int p = config_.pp, m = config_.micro_batches;
    schedule = config_.pp_schedule == "gpipe"  ? GPipeSchedule(p, m)
               : config_.pp_schedule == "1f1b" ? OneFOneBSchedule(p, m)
                                               : InterleavedSchedule(p, m, config_.pp_chunks);
    if (absl::Status s = CheckSchedule(schedule); !s.ok()) return s;
    part = {p, mesh_.pp_rank(), config_.pp_chunks,
            Pipeline::SlotsPerChunk(schedule, mesh_.pp_rank())};
  }
  model_ = std::make_unique<Gpt>(config_.shape(), micro_ / config_.micro_batches,
                                 DataParallel::PadQuantum(config_, data_.comm()), tp_.get(), part);
  model_->InitParams(config_.seed);
  if (config_.pp > 1) {
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
        Pipeline::Create(mesh_.pp_comm(), std::move(schedule), model_.get(), kCommTimeout);
    if (!pipeline.ok()) return pipeline.status();
    pipeline_ = *std::move(pipeline);
  }
  absl::StatusOr<std::unique_ptr<DataParallel>> dp =
      DataParallel::Create(config_, data_.comm(), model_.get(), mesh_.pp_comm());
  if (!dp.ok()) return dp.status();
  dp_ = std::move(*dp);
  std::error_code ec;
  std::filesystem::create_directories(options_.out_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create output directory ", options_.out_dir, ": ", ec.message()));
  }
  if (absl::Status s = OpenCheckpointRun(); !s.ok()) return s;
  if (leader()) {
    const std::string path = options_.out_dir + "/metrics.jsonl";
    if (start_step_ > 0) {
      if (absl::Status s = TruncateMetrics(path, start_step_, &train_curve_, &val_curve_);
          !s.ok()) {
        return s;
      }
    }
    metrics_.open(path, start_step_ > 0 ? std::ios::app : std::ios::trunc);
    if (!metrics_) return absl::InternalError(absl::StrCat("cannot write ", path));
    std::ofstream(options_.out_dir + "/config.json") << ToJson(config_);
  }
  return absl::OkStatus();
}

absl::Status Run::UpdateMemoryFigures() {
  // The metrics carry the largest figures of any rank.
  int64_t bytes[4] = {static_cast<int64_t>(dp_->state_bytes()),
                      static_cast<int64_t>(dp_->buffer_bytes()),
                      static_cast<int64_t>(ActivationBytes()), peak_activations_};
  if (group_.comm() != nullptr) {
    if (absl::Status s = group_.comm()
                             ->AllReduce(bytes, bytes, 4, DataType::kInt64, ReduceOp::kMax)
                             .Wait(kCommTimeout);
        !s.ok()) {
      return s;
    }
  }
  state_bytes_ = bytes[0];
  buffer_bytes_ = bytes[1];
  activation_bytes_ = bytes[2];
  peak_activations_ = bytes[3];
  return absl::OkStatus();
}

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
  sample_rng_ = Rng(meta->sample_rng);
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

absl::Status Run::Step(int step, double* loss, double* grad_norm, double* lr,
                       absl::Duration* comm_wait) {
  const int T = config_.seq_len;
  const int dp = data_.size();
  const int accum = config_.grad_accum;
  const float loss_scale = 1.0f / (static_cast<float>(micro_) * T * accum);
  dp_->ZeroGrads();
  double local_loss = 0;
  const auto on_ready = [&](int tensor) { dp_->TensorReady(tensor); };
  for (int m = 0; m < accum; ++m) {
    // The ranks of a tensor-parallel group, and of a pipeline, read the same sequences.
    const uint64_t first = static_cast<uint64_t>(step) * config_.batch_size +
                           static_cast<uint64_t>(m * dp + data_.rank()) * micro_;
    GatherTrainSamples(corpus_.train, config_.seed, first, micro_, T, tokens_.data(),
                       targets_.data());
    dp_->BeginBackward(/*sync=*/m == accum - 1);
    if (pipeline_ != nullptr) {
      if (absl::Status s =
              pipeline_->Train(tokens_.data(), targets_.data(), micro_ / config_.micro_batches, T,
                               loss_scale, /*final_pass=*/m == accum - 1, on_ready, &local_loss);
          !s.ok()) {
        return s;
      }
    } else {
      local_loss += model_->Forward(tokens_.data(), targets_.data(), micro_, T);
      model_->Backward(loss_scale, on_ready);
    }
    if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
    if (absl::Status s = dp_->FinishBackward(comm_wait); !s.ok()) return s;
  }
  // The step's loss: the mean over every token of the global batch (each tensor-parallel group
  // holds its sequences' whole loss, a pipeline's last stage).
  double sum = local_loss;
  if (absl::Status s = data_.SumDoubles(&sum, 1, comm_wait); !s.ok()) return s;
  if (pipeline_ != nullptr) {
    if (absl::Status s = PipelineFigures(&sum); !s.ok()) return s;
  }
  *loss = sum / (static_cast<double>(config_.batch_size) * T);
  *lr = LearningRate(step, config_.steps, config_.warmup_steps, config_.scaled_lr(),
                     config_.min_lr_ratio);
  return dp_->Update(*lr, grad_norm, comm_wait);
}

NextLogits Run::SampleLogits() {
  return [this](const uint8_t* context, int length, int row, float* logits) -> absl::Status {
    if (pipeline_ == nullptr) {
      model_->Forward(context, nullptr, 1, length);
      model_->GatherLogits(0, row, logits);
      return tp_->TakeError();
    }
    // Through the stages; the last one's logits go to every stage.
    double unused = 0;
    if (absl::Status s = pipeline_->Forward(context, nullptr, 1, length, 1, &unused); !s.ok()) {
      return s;
    }
    const int last = pipeline_->stages() - 1;
    if (pipeline_->stage() == last) model_->GatherLogits(0, row, logits);
    if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
    return pipeline_->Broadcast(logits, config_.shape().vocab, last);
  };
}

absl::Status Run::PipelineFigures(double* loss) {
  // Over the stages: the loss (the last stage's), the bubble shares and the peak activations.
  const Pipeline::Figures& f = pipeline_->figures();
  const double total = f.busy_s + f.idle_s + f.comm_s;
  double values[2] = {*loss, total > 0 ? f.idle_s / total : 0.0};
  if (absl::Status s = pipeline_->SumOverStages(values, 2); !s.ok()) return s;
  *loss = values[0];
  bubble_fraction_ = values[1] / pipeline_->stages();
  peak_activations_ = f.peak_activations;
  return absl::OkStatus();
}

size_t Run::ActivationBytes() const {
  const int T = config_.seq_len;
  if (pipeline_ == nullptr) return model_->ChunkActivationBytes(0, micro_, T);
  // The most held at once: every slot of every chunk at the peak (slots are sized to it).
  return model_->activation_capacity_bytes(micro_ / config_.micro_batches, T);
}

absl::StatusOr<double> Run::Evaluate(absl::Duration* comm_wait) {
  const int T = config_.seq_len;
  const int count = config_.eval_batches * config_.batch_size;
  double totals[2] = {0, 0};  // summed loss, tokens
  int filled = 0;
  absl::Status status;
  auto flush = [&] {
    if (filled == 0) return;
    if (pipeline_ != nullptr) {
      const int b = micro_ / config_.micro_batches;
      if (status.ok()) {
        status = pipeline_->Forward(tokens_.data(), targets_.data(), b, T, filled / b, &totals[0]);
      }
    } else {
      totals[0] += model_->Forward(tokens_.data(), targets_.data(), filled, T);
    }
    totals[1] += static_cast<double>(filled) * T;
    filled = 0;
  };
  // Each data-parallel rank gets count / dp sequences, a multiple of the micro-batch.
  for (int k = data_.rank(); k < count; k += data_.size()) {
    GatherValSample(corpus_.val, k, count, T, tokens_.data() + static_cast<size_t>(filled) * T,
                    targets_.data() + static_cast<size_t>(filled) * T);
    if (++filled == micro_) flush();
  }
  flush();
  if (!status.ok()) return status;
  if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
  if (absl::Status s = dp_->TakeError(); !s.ok()) return s;
  if (absl::Status s = data_.SumDoubles(totals, 2, comm_wait); !s.ok()) return s;
  if (pipeline_ != nullptr) {
    if (absl::Status s = pipeline_->SumOverStages(totals, 1); !s.ok()) return s;
  }
  return totals[0] / totals[1];
}

absl::Status Run::SaveCheckpoint(int step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.data_cursor = static_cast<uint64_t>(step) * config_.batch_size;
  meta.sample_rng = sample_rng_.state();
  meta.optimizer_step = dp_->optimizer_step();
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
  if (!s.ok() || !leader()) return s;
  return CommitLatest(run_dir_, step, config_.keep_checkpoints);
}

absl::StatusOr<TrainSummary> Run::Execute() {
  if (absl::Status s = Setup(); !s.ok()) return s;
  const int total = config_.steps;
  const int end = options_.stop_after > 0 ? std::min(options_.stop_after, total) : total;
  const double tokens_per_step = static_cast<double>(config_.batch_size) * config_.seq_len;
  if (leader()) {
    std::printf(
        "weft-train: %zu parameters (%d layers, %d heads, width %d, context %d); corpus %s: "
        "%zu train / %zu val bytes\n"
        "weft-train: %d rank%s x %d thread%s, batch %d = %d micro x %d accum x %d data-parallel "
        "ranks, lr %.3g (%s scaling), %d steps, out %s\n",
        Gpt::WholeLayout(config_.shape()).parameters(), config_.n_layer, config_.n_head,
        config_.n_embd, config_.seq_len, corpus_.source.c_str(), corpus_.train.size(),
        corpus_.val.size(), group_.size(), group_.size() == 1 ? "" : "s", config_.threads,
        config_.threads == 1 ? "" : "s", config_.batch_size, micro_, config_.grad_accum,
        data_.size(), config_.scaled_lr(), config_.lr_scaling.c_str(), total,
        options_.out_dir.c_str());
    std::printf("weft-train: %s\n", dp_->MemoryReport().c_str());
    std::fflush(stdout);
  }
  TrainSummary summary;
  if (start_step_ >= end && leader()) {
    std::printf(
        "weft-train: the checkpoint at step %d already covers this run's %d steps; "
        "nothing to do\n",
        start_step_, end);
  }
  double timed_seconds = 0, timed_wait = 0, timed_cpu = 0;
  int timed_steps = 0;
  double last_val = std::nan("");
  for (int step = start_step_; step < end; ++step) {
    const absl::Time start = absl::Now();
    const double cpu_start = ProcessCpuSeconds();
    double loss = 0, norm = 0, lr = 0;
    absl::Duration comm_wait;
    if (absl::Status s = Step(step, &loss, &norm, &lr, &comm_wait); !s.ok()) return s;
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    const double tokens_per_s = tokens_per_step / seconds;
    if (step > start_step_) {  // the first step pays for page faults and thread start-up
      timed_seconds += seconds;
      timed_cpu += cpu_seconds;
      timed_wait += absl::ToDoubleSeconds(comm_wait);
      ++timed_steps;
    }
    const int done = step + 1;
    const uint64_t comm_bytes = dp_->TakeBytesSent();
    if (absl::Status s = UpdateMemoryFigures(); !s.ok()) return s;
    std::optional<double> val;
    if ((config_.eval_every > 0 && done % config_.eval_every == 0) || done == total) {
      absl::Duration eval_wait;
      absl::StatusOr<double> v = Evaluate(&eval_wait);
      if (!v.ok()) return v.status();
      val = *v;
      last_val = *v;
    }
    if (leader()) {
      std::string line = absl::StrFormat(
          "{\"step\": %d, \"loss\": %.17g, \"lr\": %.17g, \"grad_norm\": %.17g, "
          "\"tokens_per_s\": "
          "%.1f, \"step_ms\": %.3f, \"cpu_ms\": %.3f, \"comm_wait_ms\": %.3f, "
          "\"state_bytes\": %d, \"buffer_bytes\": %d, \"activation_bytes\": %d, "
          "\"comm_bytes\": %d",
          done, loss, lr, norm, tokens_per_s, seconds * 1e3, cpu_seconds * 1e3,
          absl::ToDoubleMilliseconds(comm_wait), state_bytes_, buffer_bytes_, activation_bytes_,
          comm_bytes);
      if (pipeline_ != nullptr) {
        absl::StrAppendFormat(&line, ", \"bubble_fraction\": %.4f, \"pp_peak_activations\": %d",
                              bubble_fraction_, peak_activations_);
      }
      if (val) absl::StrAppendFormat(&line, ", \"val_loss\": %.17g", *val);
      metrics_ << line << "}\n";
      metrics_.flush();
      train_curve_.emplace_back(done, loss);
      if (val) val_curve_.emplace_back(done, *val);
      const double mean_step = timed_steps > 0 ? timed_seconds / timed_steps : seconds;
      std::printf(
          "step %*d/%d | loss %.4f | lr %.2e | %7.0f tok/s | %6.1f ms | comm wait %4.1f%% "
          "| ETA %s%s%s\n",
          static_cast<int>(std::to_string(total).size()), done, total, loss, lr, tokens_per_s,
          seconds * 1e3, 100.0 * absl::ToDoubleSeconds(comm_wait) / seconds,
          FormatDuration(mean_step * (end - done)).c_str(),
          pipeline_ == nullptr
              ? ""
              : absl::StrFormat(" | bubble %.2f (theory %.2f), %d in flight", bubble_fraction_,
                                TheoreticalBubble(pipeline_->schedule()), peak_activations_)
                    .c_str(),
          val ? absl::StrFormat(" | val loss %.4f", *val).c_str() : "");
      std::fflush(stdout);
    }
    summary.final_loss = loss;
    summary.steps_done = done;
    const bool checkpoint =
        (config_.checkpoint_every > 0 && done % config_.checkpoint_every == 0) || done == end;
    if (checkpoint) {
      if (absl::Status s = SaveCheckpoint(done); !s.ok()) return s;
    }
  }
  summary.final_val_loss = last_val;
  summary.mean_tokens_per_s = timed_steps > 0 ? tokens_per_step * timed_steps / timed_seconds : 0;
  summary.comm_wait_share = timed_seconds > 0 ? timed_wait / timed_seconds : 0;
  summary.mean_cpu_ms = timed_steps > 0 ? 1e3 * timed_cpu / timed_steps : 0;
  // The closing sample runs on the ranks of the first data-parallel replica alone (rank 0's
  // tensor-parallel group and pipeline): every rank first gathers what it needs.
  const bool sample = summary.steps_done == total && config_.sample_tokens > 0;
  std::string text;
  if (sample) {
    if (absl::Status s = dp_->GatherForInference(); !s.ok()) return s;
    if (mesh_.dp_rank() == 0) {
      absl::StatusOr<std::string> sampled =
          Generate(SampleLogits(), config_.seq_len, config_.shape().vocab, model_->row_multiple(),
                   config_.sample_prompt, config_.sample_tokens, kSampleTemperature, &sample_rng_);
      if (!sampled.ok()) return sampled.status();
      text = *std::move(sampled);
    }
  }
  if (leader() && summary.steps_done == total) {
    std::printf("weft-train: %s\n", dp_->MemoryReport().c_str());
    std::printf(
        "done: %d steps, final train loss %.4f, final val loss %.4f, mean %.0f tok/s, "
        "comm wait %.1f%% of step time, rank 0 used %.1f CPU ms per step\n",
        total, summary.final_loss, summary.final_val_loss, summary.mean_tokens_per_s,
        100.0 * summary.comm_wait_share, summary.mean_cpu_ms);
    absl::StatusOr<std::string> png = PlotLoss(options_.out_dir, train_curve_, val_curve_);
    if (png.ok()) {
      std::printf("loss curve: %s\n", png->c_str());
    } else {
      std::printf("loss curve: not drawn: %s\n", std::string(png.status().message()).c_str());
    }
    if (sample) {
      std::printf("sample (temperature %.1f):\n%s%s\n", kSampleTemperature,
                  Printable(config_.sample_prompt).c_str(), Printable(text).c_str());
    }
    std::fflush(stdout);
  }
  // Rank 0 may still be writing; nobody leaves before the job's last checkpoint exists.
  if (absl::Status s = group_.Barrier(); !s.ok()) return s;
  return summary;
}

}  // namespace

absl::StatusOr<TrainSummary> Train(const Config& config, Communicator* comm,
                                   const TrainOptions& options) {
  const int world = comm == nullptr ? 1 : comm->size();
  if (absl::Status s = Validate(config, world); !s.ok()) return s;
  Run run(config, comm, options);
  return run.Execute();
}

}  // namespace weft::trainer
