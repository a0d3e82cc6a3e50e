// The operations the engine runs: a collective, a batch of point-to-point transfers, a group.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "engine.h"
#include "peers.h"

namespace weft {

// One collective with the algorithm chosen when it was issued (alike on every rank). It runs
// that algorithm and no other, and knows it only by its id: MakeAlgorithm builds it.
class CollectiveOp final : public Op {
 public:
  CollectiveOp(Peers& peers, const CollectiveArgs& args, AlgorithmId algorithm, uint64_t seq);
  absl::Status Run(const Deadline& deadline) override;
  bool Eager() const override { return Posts(algorithm_, args_); }
  std::optional<absl::Status> TryEagerly(const Deadline& deadline, absl::Duration window) override;
  std::string Describe() const override;
  OpSummary Summarize() const override;

 private:
  // The algorithm, made on first use.
  Algorithm& Made();
  // Runs the algorithm (or finishes what TryEagerly posted) once Peers::Begin has stamped this
  // operation.
  absl::Status RunBegun();
  // For kAvg: divides the part of the result this rank holds.
  void FinishAverage();

  Peers& peers_;
  const CollectiveArgs args_;
  const AlgorithmId algorithm_;
  const Envelope envelope_;
  // Made by TryEagerly or Run, kept for Run to finish what TryEagerly posted.
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
