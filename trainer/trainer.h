// Trainer: the training loop of weft-train, single-rank or data parallel.
//
// One step: for each accumulation micro-step, gather this rank's sequences, forward, backward
// (the GradReducer all-reduces gradient buckets while backward runs; non-final micro-steps skip
// communication), then clip by global norm, AdamW, log. Every rank holds the full model and
// identical optimizer state; rank 0 writes metrics, checkpoints, the plot and the sample.
//
// Reproducibility: initialization, sample order and generation are pure functions of the seed
// and the step, so a resumed run continues bit for bit (same world size and threads).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "config.h"
#include "weft/comm/communicator.h"

namespace weft::trainer {

struct TrainOptions {
  std::string out_dir;
  bool resume = false;  // --resume auto: continue from the newest valid checkpoint in out_dir
  int stop_after = 0;   // end this invocation after this step (checkpointed); 0: run to the end
};

struct TrainSummary {
  int steps_done = 0;
  double final_loss = 0;
  double final_val_loss = 0;
  double mean_tokens_per_s = 0;  // over the steps after the first
  double comm_wait_share = 0;    // share of step time spent blocked on communication
  double mean_cpu_ms = 0;        // CPU time rank 0's process used per step (all its threads)
};

// `comm` is null for a single process without a launcher. Progress goes to stdout on rank 0.
absl::StatusOr<TrainSummary> Train(const Config& config, Communicator* comm,
                                   const TrainOptions& options);

}  // namespace weft::trainer
