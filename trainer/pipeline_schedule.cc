#include "pipeline_schedule.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::trainer {
namespace {

PipeAction Forward(int micro_batch, int chunk) { return {PipeOp::kForward, micro_batch, chunk}; }
PipeAction Backward(int micro_batch, int chunk) { return {PipeOp::kBackward, micro_batch, chunk}; }

std::string What(PipeOp op, int micro_batch, int chunk) {
  return absl::StrCat(op == PipeOp::kForward ? "forward" : "backward", " of micro-batch ",
                      micro_batch, ", chunk ", chunk);
}
std::string What(const PipeAction& a) { return What(a.op, a.micro_batch, a.chunk); }

// Index of (op, virtual stage or chunk, micro-batch) in a table of 2 · lanes · micro_batches.
size_t Slot(PipeOp op, int lane, int micro_batch, int lanes, int micro_batches) {
  return (static_cast<size_t>(op == PipeOp::kBackward) * lanes + lane) * micro_batches +
         micro_batch;
}

// What action `a` on `stage` receives from another virtual stage: the previous virtual stage's
// forward output, or the next one's backward output (none at either end).
struct Input {
  PipeOp op;
  int virtual_stage;
};
std::optional<Input> RemoteInput(const PipeSchedule& s, int stage, const PipeAction& a) {
  const int v = a.chunk * s.stages + stage;
  if (a.op == PipeOp::kForward) {
    if (v > 0) return Input{PipeOp::kForward, v - 1};
  } else if (v + 1 < s.stages * s.chunks) {
    return Input{PipeOp::kBackward, v + 1};
  }
  return std::nullopt;
}

// Runs each stage's list in order, an action waiting only for its remote input (its own forward
// ran earlier on the stage: the structural check guarantees it), until no stage can move.
// Requires a structurally valid schedule (indices in range).
struct Replay {
  std::vector<size_t> next;     // per stage: the first action not run
  std::vector<double> free_at;  // per stage: when its last action ended
  std::vector<double> busy;     // per stage
  std::vector<double> done;     // Slot(op, virtual stage, micro-batch): end time, or -1
};
Replay Run(const PipeSchedule& s, double forward, double backward) {
  const int lanes = s.stages * s.chunks;
  Replay r{std::vector<size_t>(s.stages, 0), std::vector<double>(s.stages, 0),
           std::vector<double>(s.stages, 0), std::vector<double>(2 * lanes * s.micro_batches, -1)};
  for (bool progress = true; progress;) {
    progress = false;
    for (int stage = 0; stage < s.stages; ++stage) {
      const std::vector<PipeAction>& list = s.actions[stage];
      for (; r.next[stage] < list.size(); ++r.next[stage], progress = true) {
        const PipeAction& a = list[r.next[stage]];
        double start = r.free_at[stage];
        if (std::optional<Input> in = RemoteInput(s, stage, a)) {
          const double ready =
              r.done[Slot(in->op, in->virtual_stage, a.micro_batch, lanes, s.micro_batches)];
          if (ready < 0) break;
          start = std::max(start, ready);
        }
        const double cost = a.op == PipeOp::kForward ? forward : backward;
        r.free_at[stage] = start + cost;
        r.busy[stage] += cost;
        r.done[Slot(a.op, a.chunk * s.stages + stage, a.micro_batch, lanes, s.micro_batches)] =
            start + cost;
      }
    }
  }
  return r;
}

absl::Status CheckStructure(const PipeSchedule& s) {
  if (s.stages < 1 || s.micro_batches < 1 || s.chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("stages (", s.stages, "), micro-batches (",
                                                   s.micro_batches, ") and chunks (", s.chunks,
                                                   ") must be at least 1"));
  }
  if (s.actions.size() != static_cast<size_t>(s.stages)) {
    return absl::InvalidArgumentError(absl::StrCat("the schedule has ", s.actions.size(),
                                                   " action lists for ", s.stages, " stages"));
  }
  for (int stage = 0; stage < s.stages; ++stage) {
    const std::vector<PipeAction>& list = s.actions[stage];
    // Slot(op, chunk, micro-batch): the action index where it runs, or -1.
    std::vector<int> at(2 * s.chunks * s.micro_batches, -1);
    for (size_t i = 0; i < list.size(); ++i) {
      const PipeAction& a = list[i];
      if (a.chunk < 0 || a.chunk >= s.chunks || a.micro_batch < 0 ||
          a.micro_batch >= s.micro_batches) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, ": action ", i, " (", What(a), ") is out of range: ", s.chunks,
            " chunks, ", s.micro_batches, " micro-batches"));
      }
      int& first = at[Slot(a.op, a.chunk, a.micro_batch, s.chunks, s.micro_batches)];
      if (first >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, ": the ", What(a), " runs twice (actions ", first, " and ", i, ")"));
      }
      first = static_cast<int>(i);
    }
    for (PipeOp op : {PipeOp::kForward, PipeOp::kBackward}) {
      for (int chunk = 0; chunk < s.chunks; ++chunk) {
        for (int mb = 0; mb < s.micro_batches; ++mb) {
          if (at[Slot(op, chunk, mb, s.chunks, s.micro_batches)] < 0) {
            return absl::InvalidArgumentError(
                absl::StrCat("stage ", stage, ": the ", What(op, mb, chunk), " is missing"));
          }
        }
      }
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const PipeAction& a = list[i];
      const int forward_at =
          at[Slot(PipeOp::kForward, a.chunk, a.micro_batch, s.chunks, s.micro_batches)];
      if (a.op == PipeOp::kBackward && forward_at > static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", stage, ": the ", What(a),
                                                       " (action ", i, ") runs before its forward",
                                                       " (action ", forward_at, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

PipeSchedule GPipeSchedule(int stages, int micro_batches) {
  PipeSchedule s{"gpipe", stages, micro_batches, 1, {}};
  s.actions.resize(stages);
  for (std::vector<PipeAction>& list : s.actions) {
    for (int mb = 0; mb < micro_batches; ++mb) list.push_back(Forward(mb, 0));
    for (int mb = 0; mb < micro_batches; ++mb) list.push_back(Backward(mb, 0));
  }
  return s;
}

PipeSchedule OneFOneBSchedule(int stages, int micro_batches) {
  PipeSchedule s{"1f1b", stages, micro_batches, 1, {}};
  s.actions.resize(stages);
  for (int stage = 0; stage < stages; ++stage) {
    std::vector<PipeAction>& list = s.actions[stage];
    const int warmup = std::min(stages - stage - 1, micro_batches);
    for (int mb = 0; mb < warmup; ++mb) list.push_back(Forward(mb, 0));
    for (int i = 0; i < micro_batches - warmup; ++i) {
      list.push_back(Forward(warmup + i, 0));
      list.push_back(Backward(i, 0));
    }
    for (int mb = micro_batches - warmup; mb < micro_batches; ++mb) {
      list.push_back(Backward(mb, 0));
    }
  }
  return s;
}

PipeSchedule InterleavedSchedule(int stages, int micro_batches, int chunks) {
  PipeSchedule s{"interleaved", stages, micro_batches, chunks, {}};
  s.actions.resize(stages);
  const int total = micro_batches * chunks;
  // The k-th forward (backward) of every stage: groups of `stages` micro-batches, each group run
  // through chunk 0, 1, ... (backwards: the last chunk first); a short last group when
  // micro_batches % stages != 0.
  const auto nth = [&](int k, PipeOp op) {
    const int group_start = k / (stages * chunks) * stages;
    const int group = std::min(stages, micro_batches - group_start);
    const int within = k - group_start * chunks;
    const int chunk = op == PipeOp::kForward ? within / group : chunks - 1 - within / group;
    return PipeAction{op, group_start + within % group, chunk};
  };
  for (int stage = 0; stage < stages; ++stage) {
    std::vector<PipeAction>& list = s.actions[stage];
    const int warmup = micro_batches == stages
                           ? total
                           : std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, total);
    for (int k = 0; k < warmup; ++k) list.push_back(nth(k, PipeOp::kForward));
    for (int k = 0; k < total - warmup; ++k) {
      list.push_back(nth(warmup + k, PipeOp::kForward));
      list.push_back(nth(k, PipeOp::kBackward));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(nth(k, PipeOp::kBackward));
  }
  return s;
}

// Each pair of stages exchanges over one channel per direction and kind (activations, gradients)
// whose transfers match in order: OK when every channel's receiver takes its items in the order
// the sender produces them.
absl::Status CheckChannelOrder(const PipeSchedule& s) {
  const int last = s.stages * s.chunks - 1;
  // (kind, from, to) → the (micro-batch, producing virtual stage) sent, and received, in order.
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> sent, received;
  for (int stage = 0; stage < s.stages; ++stage) {
    for (const PipeAction& a : s.actions[stage]) {
      const int v = a.chunk * s.stages + stage;
      const bool forward = a.op == PipeOp::kForward;
      if (forward ? v < last : v > 0) {
        const int to = (forward ? v + 1 : v - 1) % s.stages;
        sent[{forward, stage, to}].push_back({a.micro_batch, v});
      }
      if (const std::optional<Input> in = RemoteInput(s, stage, a)) {
        received[{forward, in->virtual_stage % s.stages, stage}].push_back(
            {a.micro_batch, in->virtual_stage});
      }
    }
  }
  for (const auto& [channel, items] : sent) {
    const std::vector<std::pair<int, int>>& got = received[channel];
    for (size_t i = 0; i < items.size() && i < got.size(); ++i) {
      if (items[i] == got[i]) continue;
      const auto& [forward, from, to] = channel;
      const char* kind = forward ? "activations" : "gradients";
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", from, " sends ", kind, " to stage ", to,
          " in another order than it receives "
          "them: transfer ",
          i, " is micro-batch ", items[i].first, " of virtual stage ", items[i].second,
          ", received as micro-batch ", got[i].first, " of virtual stage ", got[i].second));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSchedule(const PipeSchedule& schedule) {
  if (absl::Status status = CheckStructure(schedule); !status.ok()) return status;
  const Replay r = Run(schedule, 1, 1);
  std::vector<std::string> waiting;
  for (int stage = 0; stage < schedule.stages; ++stage) {
    const std::vector<PipeAction>& list = schedule.actions[stage];
    if (r.next[stage] == list.size()) continue;
    const PipeAction& a = list[r.next[stage]];
    // Only a remote input can be missing: the structural check put the stage's own forward first.
    const Input in = *RemoteInput(schedule, stage, a);
    const int from = in.virtual_stage % schedule.stages;
    const PipeAction awaited{in.op, a.micro_batch, in.virtual_stage / schedule.stages};
    const auto& producer = schedule.actions[from];
    const auto index = std::find(producer.begin(), producer.end(), awaited) - producer.begin();
    waiting.push_back(absl::StrCat("stage ", stage, " waits at action ", r.next[stage], " (",
                                   What(a), ") for stage ", from, "'s ", What(awaited),
                                   " (its action ", index, ")"));
  }
  if (!waiting.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("deadlock: ", absl::StrJoin(waiting, "; ")));
  }
  return CheckChannelOrder(schedule);
}

int PeakActivations(const PipeSchedule& schedule, int stage) {
  if (stage < 0 || stage >= static_cast<int>(schedule.actions.size())) return 0;
  int held = 0;
  int peak = 0;
  for (const PipeAction& a : schedule.actions[stage]) {
    held += a.op == PipeOp::kForward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

PipeTimeline SimulateSchedule(const PipeSchedule& schedule, double forward, double backward) {
  if (!CheckStructure(schedule).ok()) return {};
  const Replay r = Run(schedule, forward, backward);
  PipeTimeline t;
  t.busy = r.busy;
  double busy = 0;
  for (int stage = 0; stage < schedule.stages; ++stage) {
    t.makespan = std::max(t.makespan, r.free_at[stage]);
    busy += r.busy[stage];
  }
  const double capacity = schedule.stages * t.makespan;
  if (capacity > 0) t.bubble_fraction = (capacity - busy) / capacity;
  return t;
}

double TheoreticalBubble(const PipeSchedule& schedule) {
  const double p = schedule.stages;
  return (p - 1) / (schedule.micro_batches + p - 1) / schedule.chunks;
}

std::string Describe(const PipeSchedule& schedule) {
  std::vector<std::string> lines;
  for (size_t stage = 0; stage < schedule.actions.size(); ++stage) {
    std::string line = absl::StrCat("stage ", stage, ":");
    for (const PipeAction& a : schedule.actions[stage]) {
      absl::StrAppend(&line, " ", a.op == PipeOp::kForward ? "F" : "B", a.micro_batch, ".",
                      a.chunk);
    }
    lines.push_back(std::move(line));
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace weft::trainer
