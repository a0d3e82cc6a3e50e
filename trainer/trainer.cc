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
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "activation_model.h"
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
#include "run.h"

namespace weft::trainer {
namespace {

constexpr float kSampleTemperature = 0.8f;

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

}  // namespace

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
  const ActivationOptions activations = config_.activations();
  model_ = std::make_unique<Gpt>(config_.shape(), micro_ / config_.micro_batches,
                                 DataParallel::PadQuantum(config_, data_.comm()), tp_.get(), part,
                                 activations);
  predicted_activation_bytes_ =
      PredictActivationBytes(config_.shape(), micro_ / config_.micro_batches, config_.tp,
                             tp_->sequence_parallel(), part, activations);
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
  if (absl::Status s = SetUpOffload(); !s.ok()) return s;
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
  int64_t bytes[8] = {static_cast<int64_t>(dp_->state_bytes()),
                      static_cast<int64_t>(dp_->buffer_bytes()),
                      static_cast<int64_t>(model_->kept_activation_bytes()), peak_activations_,
                      predicted_activation_bytes_};
  OffloadFigures(&bytes[5], &bytes[6], &bytes[7]);
  if (group_.comm() != nullptr) {
    if (absl::Status s = group_.comm()
                             ->AllReduce(bytes, bytes, 8, DataType::kInt64, ReduceOp::kMax)
                             .Wait(kCommTimeout);
        !s.ok()) {
      return s;
    }
  }
  state_bytes_ = bytes[0];
  buffer_bytes_ = bytes[1];
  activation_bytes_ = bytes[2];
  peak_activations_ = bytes[3];
  predicted_activation_bytes_ = bytes[4];
  offload_read_ = bytes[5];
  offload_written_ = bytes[6];
  resident_bytes_ = bytes[7];
  return absl::OkStatus();
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
  }
  if (absl::Status s = UpdateMemoryFigures(); !s.ok()) return s;
  if (leader()) {
    std::printf(
        "weft-train: activations kept for backward, most of any rank: predicted %.2f MiB "
        "(recompute=%s%s, precision=%s), held %.2f MiB (%+.1f%%)\n",
        predicted_activation_bytes_ / 1048576.0, config_.recompute.c_str(),
        config_.recompute_layers >= 0
            ? absl::StrCat(", ", config_.recompute_layers, " blocks per chunk").c_str()
            : "",
        config_.precision.c_str(), activation_bytes_ / 1048576.0,
        100.0 * (static_cast<double>(activation_bytes_) / predicted_activation_bytes_ - 1));
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
    const uint64_t comm_bytes =
        dp_->TakeBytesSent() + (pipeline_ != nullptr ? pipeline_->TakeBytesSent() : 0);
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
          "{\"step\": %d, \"loss\": %.17g, \"lr\": %.17g, \"grad_norm\": %s, "
          "\"tokens_per_s\": "
          "%.1f, \"step_ms\": %.3f, \"cpu_ms\": %.3f, \"comm_wait_ms\": %.3f, "
          "\"state_bytes\": %d, \"buffer_bytes\": %d, \"activation_bytes\": %d, "
          "\"comm_bytes\": %d",
          done, loss, lr, skipped_ ? "null" : absl::StrFormat("%.17g", norm), tokens_per_s,
          seconds * 1e3, cpu_seconds * 1e3, absl::ToDoubleMilliseconds(comm_wait), state_bytes_,
          buffer_bytes_, activation_bytes_, comm_bytes);
      if (pipeline_ != nullptr) {
        absl::StrAppendFormat(&line, ", \"bubble_fraction\": %.4f, \"pp_peak_activations\": %d",
                              bubble_fraction_, peak_activations_);
        for (const auto& [key, at] :
             {std::pair{"pp_busy_ms", 0}, std::pair{"pp_idle_ms", 1}, std::pair{"pp_comm_ms", 2}}) {
          std::vector<std::string> values;
          for (size_t i = at; i < stage_ms_.size(); i += 3) {
            values.push_back(absl::StrFormat("%.3f", stage_ms_[i]));
          }
          absl::StrAppendFormat(&line, ", \"%s\": [%s]", key, absl::StrJoin(values, ", "));
        }
      }
      if (config_.precision == "fp16") {
        absl::StrAppendFormat(&line, ", \"loss_scale\": %.17g, \"skipped\": %s", scaler_.scale(),
                              skipped_ ? "true" : "false");
      }
      absl::StrAppendFormat(&line, ", \"resident_bytes\": %d, \"optimizer_ms\": %.3f",
                            resident_bytes_, absl::ToDoubleMilliseconds(dp_->optimizer_time()));
      if (config_.compression != "none") {
        absl::StrAppendFormat(&line, ", \"compressed\": %s, \"wire_bytes\": %d",
                              dp_->compressing() ? "true" : "false", comm_bytes);
      }
      if (offload_metrics_) {
        absl::StrAppendFormat(&line, ", \"offload_read_bytes\": %d, \"offload_write_bytes\": %d",
                              offload_read_, offload_written_);
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

absl::StatusOr<TrainSummary> Train(const Config& config, Communicator* comm,
                                   const TrainOptions& options) {
  const int world = comm == nullptr ? 1 : comm->size();
  if (absl::Status s = Validate(config, world); !s.ok()) return s;
  Run run(config, comm, options);
  return run.Execute();
}

}  // namespace weft::trainer
