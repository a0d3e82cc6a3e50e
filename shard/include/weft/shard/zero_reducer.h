// ZeroReducer: the collectives of ZeRO stages 1 and 2 over a ShardLayout.
//
//   auto zero = weft::shard::ZeroReducer::Create(comm, layout, grads, params, options);
//   (*zero)->BeginBackward(/*sync=*/last_micro_step);
//   ... backward: (*zero)->MarkUnitReady(u) as each unit's gradient becomes final ...
//   absl::Status s = (*zero)->Finish(timeout);  // shard_grads(): this rank's averaged slices
//   ... clip and update the parameters this rank owns ...
//   s = (*zero)->GatherParams(timeout);           // every rank's updated slices, everywhere
//
// `grads` and `params` are the full flat buffers the layout describes. A unit's gradient is
// reduce-scattered (averaged: kAvg) straight from its place in `grads` into this rank's slice of
// shard_grads(), one collective per unit; GatherParams all-gathers each unit's parameters in place.
// Stage 1 issues the reduce-scatters when Finish is called; stage 2 issues each one as soon as its
// unit is ready, so they run on the communicator's progress thread while backward goes on. Units
// are issued last to first (the order backward finishes them) on every rank: a unit that is ready
// waits for the units after it, because collectives must match across ranks. With sync = false
// (gradient accumulation's non-final micro-steps) nothing is communicated.
//
// Create is collective: every rank must pass the same layout (its hash is compared, and a mismatch
// names both ranks). Not thread-safe: one thread runs backward and calls everything here.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"
#include "weft/comm/work.h"
#include "weft/shard/shard_layout.h"

namespace weft::shard {

struct ZeroOptions {
  int stage = 1;  // 1: reduce after backward; 2: during backward, unit by unit
  absl::Duration timeout = absl::Seconds(300);  // bounds Create's layout check
};

class ZeroReducer {
 public:
  // `comm` (of layout.ranks() ranks), `grads` and `params` must outlive the reducer.
  static absl::StatusOr<std::unique_ptr<ZeroReducer>> Create(Communicator* comm, ShardLayout layout,
                                                             float* grads, float* params,
                                                             const ZeroOptions& options = {});
  ~ZeroReducer();
  ZeroReducer(const ZeroReducer&) = delete;
  ZeroReducer& operator=(const ZeroReducer&) = delete;

  const ShardLayout& layout() const { return layout_; }
  // This rank's slices of the averaged gradient after Finish (layout().shard_size() elements).
  float* shard_grads() { return shard_grads_.data(); }

  // Starts a backward pass. sync = false: accumulate locally, communicate nothing.
  void BeginBackward(bool sync);
  // Unit u's gradient is final for this pass. Errors: u out of range, marked twice in a pass, no
  // BeginBackward.
  absl::Status MarkUnitReady(int u);
  // Issues what is left and waits (at most `timeout` in all) for every unit's reduce-scatter.
  // Errors name the unit: one never marked ready, a failed collective, the timeout.
  absl::Status Finish(absl::Duration timeout);
  // All-gathers every unit's parameters in place from the slices the ranks own.
  absl::Status GatherParams(absl::Duration timeout);

  // Gathers a shard-shaped buffer (layout().shard_size() elements on every rank) into a full
  // flat one (layout().total() elements), e.g. the optimizer's moments for a checkpoint.
  absl::Status GatherShards(const float* shard, float* full, absl::Duration timeout);

  // Time the last Finish or GatherParams spent blocked on communication.
  absl::Duration last_wait() const { return last_wait_; }

 private:
  ZeroReducer(Communicator* comm, ShardLayout layout, float* grads, float* params,
              const ZeroOptions& options);
  absl::Status CheckLayoutAcrossRanks();
  void IssueReadyUnits();
  absl::Status WaitAll(std::vector<Work>& works, const char* what, absl::Duration timeout);

  Communicator* comm_;
  ShardLayout layout_;
  float* grads_;
  float* params_;
  ZeroOptions options_;
  std::vector<float> shard_grads_;
  std::vector<char> ready_;  // per unit, this pass
  std::vector<Work> works_;  // per unit, this pass
  int next_to_issue_ = 0;    // counts units issued, last unit first
  bool in_pass_ = false;
  bool sync_ = true;
  absl::Duration last_wait_;
};

}  // namespace weft::shard
