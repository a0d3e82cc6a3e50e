// AlgorithmSelector: which algorithm carries out a collective.
//
// WEFT_ALGO (or CommOptions::algorithm) forces a choice, either for every collective that
// implements it ("ring") or per collective ("all_reduce=rabenseifner,broadcast=tree"). Otherwise
// the tuner (tuner.h) picks the algorithm with the lowest predicted time for the collective, its
// size and the rank layout; WEFT_DEBUG=INFO prints each decision with its prediction once per
// collective and power-of-two size class. A host with several lasting states (tuner_calibration.h)
// has a tuner for each, the state a job starts in first. Where every rank shares the host, the
// selector names as contenders the states' choices where they disagree and the algorithms a state
// prices within kNearFactor of its choice, and the job's trials time them (algorithm_trials.h).
// A forced algorithm that cannot run on the communicator (shm_direct across hosts or over TCP,
// cma_direct where ptrace forbids cross-memory attach) fails its creation (CheckForced), saying
// why: a silent fallback would hide that the job does not run what it asked for. In a one-rank
// communicator, where no algorithm moves data, the tuner's choice runs instead.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/algorithm.h"
#include "algorithms/tuner.h"

namespace weft {

class AlgorithmSelector {
 public:
  static constexpr int kMaxContenders = 4;
  // A host's states are points of a drift more than a few fixed settings, and the drift turns the
  // direct algorithms' ranking over by up to 2x: on the 2-vCPU VM a loop of 512 KiB all-reduces
  // took 50 us on shm_direct against 95 on cma_direct in one state, 215 against 200 in another,
  // while calibration priced them 206 and 203. An algorithm priced within this factor of a state's
  // choice may be the fastest now, so the job times it too.
  static constexpr double kNearFactor = 2.5;
  // Below this price no algorithm contends: a contended collective's bookkeeping (a lock and a
  // lookup here and in the trials, two clock reads) costs about 0.3 us, and 8 KiB reduce-scatters
  // priced at 1.2 us ran 1.1-1.4x forced shm_direct per cycle with contenders, 0.8-1.1x without.
  static constexpr double kMinContestedSeconds = 5e-6;

  // Fails on an unknown algorithm or collective name, listing the valid ones.
  static absl::StatusOr<AlgorithmSelector> Create(absl::string_view spec);

  // Replaces the tuners (one CostTuner with the built-in model until then), one per state of the
  // host, the state a job starts in first; called at creation, before any operation, with the
  // models calibration produced.
  void SetTuners(std::vector<std::shared_ptr<const Tuner>> tuners);
  void SetTuner(std::shared_ptr<const Tuner> tuner) { SetTuners({std::move(tuner)}); }

  struct Choice {
    AlgorithmId algorithm = AlgorithmId::kRing;  // the first state's tuner's
    // What the job's trials pick among (algorithm_trials.h): the first state's choice, the other
    // states' where they differ, then those a state prices within kNearFactor of its choice,
    // nearest first; none where that leaves one, or where a state prices its choice below
    // kMinContestedSeconds.
    std::array<AlgorithmId, kMaxContenders> contenders = {};
    int contender_count = 0;
    // With contenders: the least any state's tuner predicts for its choice, in seconds.
    double fastest_s = 0;
  };
  Choice Choose(OpKind kind, size_t bytes, const Peers& peers) const;
  // FailedPrecondition naming the first collective whose forced algorithm cannot run on `peers`
  // and why (Unusable); `transport` is the communicator's, for the message.
  absl::Status CheckForced(const Peers& peers, absl::string_view transport) const;
  // The first state's tuner's predicted seconds for `algorithm` (negative when it cannot price
  // it), and a line with every candidate's prediction.
  double Predict(AlgorithmId algorithm, OpKind kind, size_t bytes, const Peers& peers) const;
  std::string Explain(OpKind kind, size_t bytes, const Peers& peers) const;

 private:
  // The algorithm WEFT_ALGO asks for, if any.
  std::optional<AlgorithmId> Forced(OpKind kind) const;

  // Decisions WEFT_DEBUG=INFO has printed: (collective, log2 of the size). Shared by copies.
  struct Printed {
    std::mutex mu;
    std::set<std::pair<OpKind, int>> seen;
  };

  std::optional<AlgorithmId> forced_all_;
  std::map<OpKind, AlgorithmId> forced_;
  std::vector<std::shared_ptr<const Tuner>> tuners_ = {std::make_shared<CostTuner>(CostModel())};
  std::shared_ptr<Printed> printed_ = std::make_shared<Printed>();

  // The decisions by (collective, bytes): pricing every candidate costs more than a small
  // collective itself, and a training step repeats the same few sizes. Shared by copies.
  struct Decided {
    std::mutex mu;
    std::map<std::pair<OpKind, size_t>, Choice> by_call;
    // The latest decision without contenders (PackDecision), read without the lock: a loop of one
    // collective at one size, the common case, never takes it.
    std::atomic<uint64_t> latest{kNoDecision};
  };
  static constexpr uint64_t kNoDecision = ~uint64_t{0};
  // (bytes, kind, algorithm) in one word; kNoDecision for sizes too large to pack.
  static uint64_t PackDecision(OpKind kind, size_t bytes, AlgorithmId id);
  std::shared_ptr<Decided> decided_ = std::make_shared<Decided>();
};

}  // namespace weft
