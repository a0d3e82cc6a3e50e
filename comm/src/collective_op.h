// The operations the engine runs: a collective, a batch of point-to-point transfers, a group.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/algorithm_trials.h"
#include "algorithms/selector.h"
#include "algorithms/shm_direct.h"
#include "engine.h"
#include "peers.h"

namespace weft {

// A tuned collective whose algorithm the host's states disagree on (algorithm_trials.h): its part
// in the trials, and what it chooses from.
struct TrialPart {
  AlgorithmTrials* trials = nullptr;
  AlgorithmSelector::Choice choice;
  size_t bytes = 0;  // as the selector counts them
  AlgorithmTrials::Plan plan;
};

// One collective with its algorithm chosen at issue time (every rank chooses identically), or,
// playing a part in the trials, as it starts (the same on every rank too).
class CollectiveOp final : public Op {
 public:
  CollectiveOp(Peers& peers, const CollectiveArgs& args, AlgorithmId algorithm, uint64_t seq,
               std::optional<TrialPart> trial = std::nullopt);
  absl::Status Run(const Deadline& deadline) override;
  bool Eager() const override {
    return (!trial_ || trial_->plan.role == AlgorithmTrials::Role::kIncumbent) &&
           Posts(algorithm_, args_);
  }
  std::optional<absl::Status> TryEagerly(const Deadline& deadline, absl::Duration window) override;
  std::string Describe() const override;
  OpSummary Summarize() const override;

 private:
  // The algorithm its part in the trials runs, as it starts.
  void ChooseForTrials();
  // The algorithm, made on first use.
  Algorithm& Made();
  // Runs the algorithm (or finishes what TryEagerly posted) once Peers::Begin has stamped this
  // operation.
  absl::Status RunBegun();
  // For kAvg: divides the part of the result this rank holds.
  void FinishAverage();

  Peers& peers_;
  const CollectiveArgs args_;
  AlgorithmId algorithm_;
  Envelope envelope_;
  std::optional<TrialPart> trial_;
  // Made by TryEagerly or Run, kept for Run to finish. The algorithms that post (shm_direct's
  // line rounds) are kept inline, so that a loop of tiny collectives allocates nothing.
  std::optional<ShmDirect> posting_;
  std::unique_ptr<Algorithm> made_;
  bool posted_ = false;  // TryEagerly's Post went through
};

// Sends and receives that progress together (a lone Send or Recv is a batch of one).
struct P2pTransfer {
  bool is_send = false;
  int peer = 0;
  void* data = nullptr;
  size_t bytes = 0;
  Envelope envelope;
};

class P2pOp final : public Op {
 public:
  P2pOp(Peers& peers, std::vector<P2pTransfer> transfers)
      : peers_(peers), transfers_(std::move(transfers)) {}
  absl::Status Run(const Deadline& deadline) override;
  std::string Describe() const override;
  OpSummary Summarize() const override;

  // For GroupEnd, which merges the transfers of a group into one GroupOp.
  std::vector<P2pTransfer> TakeTransfers() { return std::move(transfers_); }

 private:
  Peers& peers_;
  std::vector<P2pTransfer> transfers_;
};

// What GroupStart/GroupEnd collected: the transfers start first, so the collectives that follow
// (and the peers' matching transfers) can never wait on them in a cycle.
class GroupOp final : public Op {
 public:
  GroupOp(Peers& peers, std::vector<P2pTransfer> transfers,
          std::vector<std::unique_ptr<Op>> collectives)
      : peers_(peers), transfers_(std::move(transfers)), collectives_(std::move(collectives)) {}
  absl::Status Run(const Deadline& deadline) override;
  std::string Describe() const override;
  OpSummary Summarize() const override;

 private:
  Peers& peers_;
  std::vector<P2pTransfer> transfers_;
  std::vector<std::unique_ptr<Op>> collectives_;
};

}  // namespace weft
