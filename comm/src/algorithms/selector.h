// AlgorithmSelector: which algorithm carries out a collective.
//
// WEFT_ALGO (or CommOptions::algorithm) forces a choice, either for every collective that
// implements it ("ring") or per collective ("all_reduce=rabenseifner,broadcast=tree"). Otherwise
// the tuner (tuner.h) picks the algorithm with the lowest predicted time for the collective, its
// size and the rank layout; WEFT_DEBUG=INFO prints each decision with its prediction once per
// collective and power-of-two size class. A forced algorithm that cannot run here (shm_direct
// across hosts) falls back to the tuner's choice, and WEFT_DEBUG=INFO says so.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "algorithms/algorithm.h"
#include "algorithms/tuner.h"

namespace weft {

class AlgorithmSelector {
 public:
  // Fails on an unknown algorithm or collective name, listing the valid ones.
  static absl::StatusOr<AlgorithmSelector> Create(absl::string_view spec);

  // Replaces the tuner (a CostTuner with the built-in model until then); called at creation,
  // before any operation, with the model calibration produced.
  void SetTuner(std::shared_ptr<const Tuner> tuner) {
    tuner_ = std::move(tuner);
    decided_ = std::make_shared<Decided>();
  }

  AlgorithmId Choose(OpKind kind, size_t bytes, const Peers& peers) const;
  // The tuner's predicted seconds for the algorithm Choose returns (negative when it cannot
  // price it), and a line with every candidate's prediction.
  double Predict(OpKind kind, size_t bytes, const Peers& peers) const;
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
  std::shared_ptr<const Tuner> tuner_ = std::make_shared<CostTuner>(CostModel());
  std::shared_ptr<Printed> printed_ = std::make_shared<Printed>();

  // The tuner's decisions by (collective, bytes): pricing every candidate costs more than a small
  // collective itself, and a training step repeats the same few sizes. Shared by copies.
  struct Decided {
    std::mutex mu;
    std::map<std::pair<OpKind, size_t>, AlgorithmId> by_call;
    // The latest decision (PackDecision), read without the lock: a loop of one collective at
    // one size, the common case, never takes it.
    std::atomic<uint64_t> latest{kNoDecision};
  };
  static constexpr uint64_t kNoDecision = ~uint64_t{0};
  // (bytes, kind, algorithm) in one word; kNoDecision for sizes too large to pack.
  static uint64_t PackDecision(OpKind kind, size_t bytes, AlgorithmId id);
  std::shared_ptr<Decided> decided_ = std::make_shared<Decided>();
};

}  // namespace weft
