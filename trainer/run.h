// Run: the state and steps of one weft-train invocation on one rank (internal to weft_trainer;
// Train in trainer.h is the entry point).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "config.h"
#include "data.h"
#include "data_parallel.h"
#include "generate.h"
#include "loss_scaler.h"
#include "mesh.h"
#include "model.h"
#include "pipeline.h"
#include "rng.h"
#include "tensor_parallel.h"
#include "trainer.h"
#include "weft/comm/communicator.h"
#include "weft/offload/tiered_store.h"
#include "weft/shard/checkpoint.h"

namespace weft::trainer {

inline constexpr absl::Duration kCommTimeout = absl::Seconds(120);

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

// One invocation of weft-train on this rank: the mesh, the model, its parallel drivers and the
// loop. trainer.cc sets it up and runs the loop, run_step.cc holds a step, evaluation and
// sampling, run_checkpoints.cc saving and resuming.
class Run {
 public:
  Run(const Config& config, Communicator* comm, const TrainOptions& options)
      : config_(config),
        options_(options),
        group_(comm),
        micro_(config.micro_batch(group_.size())),
        scaler_(config.precision == "fp16" ? config.loss_scale : 1.0, config.loss_scale_window),
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
  // state_bytes_ and buffer_bytes_: the most of any rank (collective).
  absl::Status UpdateMemoryFigures();
  absl::StatusOr<double> Evaluate(absl::Duration* comm_wait);
  absl::Status SaveCheckpoint(int step);
  // Offloads what offload= or memory_budget= asks for (run_offload.cc), printing the plan.
  absl::Status SetUpOffload();
  // Per step with offloading: this rank's disk bytes read and written since the last call and
  // its resident set (RSS).
  void OffloadFigures(int64_t* read, int64_t* written, int64_t* resident);

  const Config config_;
  const TrainOptions options_;
  const Group group_;  // every rank
  const int micro_;
  Mesh mesh_;
  Group data_{nullptr};  // this rank's data-parallel group
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<Pipeline> pipeline_;                   // pp > 1
  std::unique_ptr<offload::TieredStore> offload_store_;  // outlives dp_, whose moments it holds
  std::unique_ptr<DataParallel> dp_;
  double bubble_fraction_ = 0;    // the last step's, the mean over the stages
  std::vector<double> stage_ms_;  // the last step's busy, idle and comm ms of each stage
  int64_t peak_activations_ =
      0;  // the last step's micro-batch × chunk activations, most of any stage
  int64_t activation_bytes_ = 0;  // the most any rank keeps for backward
  int64_t predicted_activation_bytes_ = 0;
  bool offload_metrics_ =
      false;  // offload= or memory_budget= set: the step lines carry its figures
  int64_t offload_read_ = 0, offload_written_ = 0, resident_bytes_ = 0;  // the most of any rank
  offload::IoCounters offload_seen_;  // the counters at the last OffloadFigures  // this rank's,
                                      // from the activation model; then the most
  int64_t state_bytes_ = 0;           // the most any rank keeps between steps
  int64_t buffer_bytes_ = 0;          // the most any rank holds during a step (DataParallel)
  LossScaler scaler_;                 // fp16's (precision=fp16; scale 1 otherwise)
  bool skipped_ = false;              // the last step found an overflow and changed nothing
  Rng sample_rng_;
  Corpus corpus_;
  std::vector<uint8_t> tokens_, targets_;
  int start_step_ = 0;
  std::string run_dir_;  // this invocation's DIR/checkpoints/run-NNN, the same on every rank
  std::ofstream metrics_;
  std::vector<std::pair<int, double>> train_curve_, val_curve_;
};

}  // namespace weft::trainer
