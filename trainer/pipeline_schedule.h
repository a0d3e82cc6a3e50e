// Pipeline schedules as data: for each pipeline stage, the forwards and backwards it runs, in
// order, and a checker that proves a schedule complete and deadlock-free before anything runs it.
//
// The model's blocks are cut into stages·chunks contiguous ranges, the virtual stages. Virtual
// stage v = chunk·stages + stage lives on stage v % stages as its chunk v / stages, so with more
// than one chunk each stage holds several non-adjacent ranges (Megatron's interleaving) and a
// micro-batch goes around the stages `chunks` times. A stage's chunk-c action is one pass through
// virtual stage c·stages + stage.
//
// Data dependencies (what an executor sends and receives):
//   forward of micro-batch m on virtual stage v > 0: v − 1's forward output of m;
//   backward of m on v: v's own forward of m (the saved activations) and, for v below the last
//     virtual stage, v + 1's backward output of m (the gradient of v's output).
// Sends never block and a stage runs its list strictly in order, so a schedule is deadlock-free
// exactly when replaying it, each stage waiting only at receives, brings every stage to its end.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace weft::trainer {

enum class PipeOp { kForward, kBackward };

// One step of a stage's schedule: the forward or backward of one micro-batch through one of this
// stage's model chunks.
struct PipeAction {
  PipeOp op = PipeOp::kForward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk on this stage: virtual stage chunk·stages + stage
  bool operator==(const PipeAction&) const = default;
};

// A schedule: for each pipeline stage (rank), the actions it runs, in order. Virtual stage
// v = chunk·stages + stage holds the v-th contiguous range of blocks; the forward of micro-batch m
// on virtual stage v > 0 needs v−1's forward output of m, the backward of m on v needs v's own
// forward of m and, for v < last, v+1's backward output of m.
struct PipeSchedule {
  std::string name;  // "gpipe", "1f1b", "interleaved"
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;
  std::vector<std::vector<PipeAction>> actions;  // [stage]
};

// GPipe: every stage runs all its forwards, then all its backwards, both in micro-batch order
// (the last stage has every forward done when its backwards start, so the order of the backwards
// changes neither the bubble nor the peak). Holds all m micro-batches' activations.
PipeSchedule GPipeSchedule(int stages, int micro_batches);

// 1F1B (PipeDream-flush): stage s runs min(stages − s − 1, m) warm-up forwards, then alternates
// one forward and one backward until its forwards are done, then the remaining backwards. Same
// bubble as GPipe, but stage s holds at most min(stages − s, m) micro-batches.
PipeSchedule OneFOneBSchedule(int stages, int micro_batches);

// Megatron's interleaved 1F1B over `chunks` model chunks per stage. Forwards go through the
// chunks in groups of `stages` micro-batches (chunk 0 for micro-batches 0..p−1, chunk 1 for the
// same, ..., then the next group); backwards in the same order with the chunks reversed. Stage s
// runs 2(p − s − 1) + (chunks − 1)·p warm-up forwards (capped at m·chunks; all of them when
// m == p), then 1F1B, then the remaining backwards. Precondition: micro_batches % stages == 0
// (Megatron's group size is the stage count); other counts yield a schedule with a short last
// group that can deadlock (8 stages, 10 micro-batches, 2 chunks does), which CheckSchedule finds.
PipeSchedule InterleavedSchedule(int stages, int micro_batches, int chunks);

// OK when every stage runs the forward and the backward of every (micro-batch, chunk) exactly
// once, each backward after its own forward on that stage, chunk and micro-batch indices in range,
// and the schedule cannot deadlock: replayed with sends that never block and receives that wait,
// every stage reaches its end. Otherwise InvalidArgument naming the first problem (stage, action
// index, what is missing, repeated or out of order); a deadlock lists every stage left waiting,
// the action it waits at and the stage and action whose output it waits for. Last, each pair of
// stages must exchange activations (and gradients) in one order on both sides, as an executor
// whose channels match transfers in order needs.
absl::Status CheckSchedule(const PipeSchedule& schedule);

// The most (micro-batch, chunk) pairs whose forward has run and backward has not, at any point of
// stage `stage`'s list: the activations it must hold, counted in chunks (one chunk is 1/chunks of
// the stage's blocks). 0 for a stage out of range.
int PeakActivations(const PipeSchedule& schedule, int stage);

// Unit-cost replay: each action (one chunk of one micro-batch) takes `forward` or `backward` time
// units, transfers are free, and an action starts when its inputs are ready and its stage is
// free. busy: per stage, the time spent in actions; bubble_fraction: idle time over
// (stages × makespan). Meant for schedules CheckSchedule accepts: under a deadlock the actions
// never reached are left out, and one rejected for anything else (an action missing, repeated,
// out of range or out of order) gives an empty timeline.
struct PipeTimeline {
  double makespan = 0;
  double bubble_fraction = 0;
  std::vector<double> busy;  // per stage
};
PipeTimeline SimulateSchedule(const PipeSchedule& schedule, double forward, double backward);

// The textbook bubble fraction: (p − 1)/(m + p − 1) for GPipe and 1F1B, divided by the number of
// chunks for the interleaved schedule (Narayanan et al. 2021). Uses the schedule's stages,
// micro_batches and chunks only. For chunks > 1 it is a lower bound: the fill still takes p − 1
// chunk steps each way, and SimulateSchedule of InterleavedSchedule gives
// (p − 1)/(m·chunks + p − 1).
double TheoreticalBubble(const PipeSchedule& schedule);

// One line per stage, "stage 0: F0.0 F1.0 B0.0 ..." (F/B, micro-batch, chunk), for error
// messages and logs.
std::string Describe(const PipeSchedule& schedule);

}  // namespace weft::trainer
