// Pipeline: runs a schedule's actions on this pipeline stage, moving activations forward and their
// gradients backward between the stages over Weft send/recv.
//
// Every directed channel between neighbouring stages (activations s → s+1, gradients s+1 → s, and
// around the ring for the interleaved schedule) is a two-rank communicator of its own, so a
// channel's transfers match in order and a blocked send on one channel never holds up a receive on
// another: a schedule CheckSchedule accepts (sends never block, receives wait) runs without
// deadlock, whatever the message size. Receives are posted one action ahead, so they progress
// while this stage computes; sends go out from buffers of their own, reaped once done. Transfer
// buffers return to a pool and serve the next micro-batches. Activations live in the model's slots
// from a micro-batch's forward to its backward.
//
// The tied embedding: the first stage's `wte` and the last stage's copy get the sum of both
// gradients (one all-reduce over the two, after the pass), before the data-parallel reducer hears
// that they are ready.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model.h"
#include "pipeline_schedule.h"
#include "weft/comm/communicator.h"

namespace weft::trainer {

class Pipeline {
 public:
  // Collective over `stages` (this rank's pipeline group, ordered by stage; at least 2 ranks):
  // makes the channels' communicators. `schedule` must have passed CheckSchedule; `model` holds
  // this stage's part with SlotsPerChunk(schedule, stage) slots and must outlive the result.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(Communicator* stages,
                                                          PipeSchedule schedule, Gpt* model,
                                                          absl::Duration timeout);
  // The activation slots each chunk of `stage` needs under `schedule`: its most micro-batches in
  // flight at once.
  static std::vector<int> SlotsPerChunk(const PipeSchedule& schedule, int stage);

  // What one pass cost this stage.
  struct Figures {
    double busy_s = 0;         // computing
    double idle_s = 0;         // waiting for another stage's activation or gradient (the bubble)
    double comm_s = 0;         // copying, posting and finishing transfers
    int peak_activations = 0;  // micro-batch × chunk activations held at once
  };

  // One training pass of the schedule: micro-batch m's B sequences of T tokens are at
  // tokens + m·B·T (targets alike; read by the first and last stage). Adds the last stage's summed
  // loss to *loss. on_ready(tensor) is called once per tensor, after the last backward that
  // touches it, when `final_pass` (else never: accumulation keeps gradients local).
  absl::Status Train(const uint8_t* tokens, const uint8_t* targets, int B, int T, float loss_scale,
                     bool final_pass, const std::function<void(int tensor)>& on_ready,
                     double* loss);
  // Forwards only, micro-batch by micro-batch through every chunk (evaluation, and sampling
  // without targets: then the last stage's logits stay in slot 0 of its head chunk).
  absl::Status Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T,
                       int micro_batches, double* loss);

  const Figures& figures() const { return figures_; }
  // Bytes this stage sent since the last call: activations, gradients, and the tied embedding's
  // all-reduce between the two ends (as a ring sends it: the gradient once).
  uint64_t TakeBytesSent() { return std::exchange(bytes_sent_, 0); }
  int stage() const { return stage_; }
  int stages() const { return schedule_.stages; }
  const PipeSchedule& schedule() const { return schedule_; }
  // Collective over the pipeline group: every stage gets `data` from `root`.
  absl::Status Broadcast(float* data, size_t count, int root);
  // Collective over the pipeline group: sums `count` doubles over the stages, in place.
  absl::Status SumOverStages(double* values, size_t count);
  // Collective over the pipeline group: every stage's `count` doubles, in stage order, into all.
  absl::Status GatherOverStages(const double* mine, size_t count, double* all);

 private:
  // One transfer in flight with the buffer it reads or fills.
  struct Transfer {
    Work work;
    std::vector<float> buffer;
  };
  // A stage's action and where its input comes from.
  struct Step {
    PipeAction action;
    bool receives = false;  // its input comes over a channel
  };

  Pipeline(Communicator* stages, PipeSchedule schedule, Gpt* model, absl::Duration timeout);
  // Runs `steps` (this stage's actions); see Train.
  absl::Status Run(const std::vector<Step>& steps, const uint8_t* tokens, const uint8_t* targets,
                   int B, int T, float loss_scale, bool final_pass,
                   const std::function<void(int tensor)>& on_ready, double* loss);
  // Posts the receive of step `i`'s input into a fresh buffer.
  void PostReceive(const Step& step, size_t count, Transfer* into);
  // Sends `count` floats from `data` (copied) over `channel`.
  absl::Status Send(Communicator* channel, const float* data, size_t count);
  // Waits for sends whose buffers are done, keeping the rest; with `all`, for every one.
  absl::Status ReapSends(bool all);
  // A transfer buffer of `count` floats: a spare one when there is one (buffers are reused across
  // micro-batches and steps), and giving one back.
  std::vector<float> TakeBuffer(size_t count);
  void GiveBack(std::vector<float> buffer) { spare_.push_back(std::move(buffer)); }
  absl::Status Wait(Work& work, double* seconds);

  Communicator* stages_comm_;
  PipeSchedule schedule_;
  Gpt* model_;
  absl::Duration timeout_;
  int stage_;
  // Two-rank channels (null where this stage has none): activations from the previous stage and
  // to the next, gradients from the next and to the previous.
  std::unique_ptr<Communicator> act_in_, act_out_, grad_in_, grad_out_;
  std::unique_ptr<Communicator> embedding_group_;  // first and last stage (the tied embedding)
  std::vector<Transfer> sends_;
  std::vector<std::vector<float>> spare_;
  Figures figures_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace weft::trainer
