// AlgorithmSelector: which algorithm carries out a collective.
//
// WEFT_ALGO (or CommOptions::algorithm) forces a choice, either for every collective that
// implements it ("ring") or per collective ("all_reduce=rabenseifner,broadcast=tree"). Otherwise
// the tuner (tuner.h) picks the algorithm with the lowest predicted time for the collective, its
// size and the communicator's layout. The choice is made once, when a collective is issued, and
// the operation carries it; it depends on nothing that differs between ranks, calls or runs, so
// every rank runs every collective on the same algorithm, and two runs of a job sum in the same
// order. WEFT_DEBUG=INFO prints the model in force at creation and each decision with every
// candidate's prediction once per collective and power-of-two size class.
// A forced algorithm that cannot run on the communicator (shm_direct across hosts or over TCP,
// cma_direct where ptrace forbids cross-memory attach) fails its creation (CheckForced), saying
// why: a silent fallback would hide that the job does not run what it asked for. In a one-rank
// communicator, where no algorithm moves data, the tuner's choice runs instead.
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

  // Called once at creation, before any operation: the model every rank shares, this
  // communicator's layout, and this rank (rank 0 logs the decisions).
  void SetTuner(CostModel model, CommLayout layout, int rank);

  AlgorithmId Choose(OpKind kind, size_t bytes) const;
  // FailedPrecondition naming the first collective whose forced algorithm cannot run on `peers`
  // and why (Unusable); `transport` is the communicator's, for the message.
  absl::Status CheckForced(const Peers& peers, absl::string_view transport) const;
  // The tuner's predicted seconds for `algorithm` (negative where it cannot run), and a line with
  // the choice, every candidate's prediction and the model's source.
  double Predict(AlgorithmId algorithm, OpKind kind, size_t bytes) const;
  std::string Explain(OpKind kind, size_t bytes) const;
  const CostTuner& tuner() const { return *tuner_; }

 private:
  // The algorithm WEFT_ALGO asks for, if any, where it can run on this layout.
  std::optional<AlgorithmId> Forced(OpKind kind) const;
  AlgorithmId Decide(OpKind kind, size_t bytes) const;

  std::optional<AlgorithmId> forced_all_;
  std::map<OpKind, AlgorithmId> forced_;
  std::shared_ptr<const CostTuner> tuner_ = std::make_shared<CostTuner>(CostModel());
  CommLayout layout_;
  int rank_ = 0;

  // The decisions by (collective, bytes): pricing every candidate costs more than a small
  // collective itself, and a training step repeats the same few sizes. Shared by copies.
  struct Decided {
    std::mutex mu;
    std::map<std::pair<OpKind, size_t>, AlgorithmId> by_call;
    std::set<std::pair<OpKind, int>> printed;  // (collective, log2 size) WEFT_DEBUG=INFO printed
    // The latest decision packed (PackDecision), read without the lock: a loop of one
    // collective at one size, the common case, never takes it.
    std::atomic<uint64_t> latest{kNoDecision};
  };
  static constexpr uint64_t kNoDecision = ~uint64_t{0};
  // (bytes, kind, algorithm) in one word; kNoDecision for sizes too large to pack.
  static uint64_t PackDecision(OpKind kind, size_t bytes, AlgorithmId id);
  std::shared_ptr<Decided> decided_ = std::make_shared<Decided>();
};

}  // namespace weft
