// AlgorithmTrials: which of the algorithms its host's states disagree on runs a collective
// fastest now, found by timing each on the job's own collectives.
//
// A host can run in lasting states that rank the direct algorithms differently (a VM whose vCPUs
// the hypervisor moves between cores that share more or less cache), and its cache keeps a model
// of each (tuner_calibration.h). Creation's recheck finds the state a job starts in, but that VM
// also left it within a second in a quarter to a third of its jobs, and its states are points of a
// drift more than a few fixed settings: a probe priced against the models put a job in its slow
// state while shm_direct ran 3.5x faster than the slow state's choice right beside it. So where
// the states' tuners disagree on a collective's algorithm (the selector's contenders), the job
// asks the machine, on its own collectives of that kind and size. The incumbent (at first the
// first state's choice) runs them, timed; every so often a round of trials runs the next ones on
// each challenger (the other contenders) twice, and the one after the round begins with the ranks
// agreeing on the times, the incumbent's last two and the trials', and runs, as every one after
// it, on the contender whose faster time was fastest. A collective's time is the most any rank
// spent on it (a tiny all-reduce of the maximum, exact, so every rank holds the same numbers): in
// a loop the rank that starts first waits for the others. Spent on it: from the end of the one
// before, where that was the previous collective and of the same size, else from its start. In a
// loop of 512 KiB all-reduces on shm_direct each took 40 us from its start, 71 us from the one
// before (cma_direct: 115 either way): shm_direct leaves part of its cost to the next
// collective, and timed from its own start it would have won rounds it lost. A round comes once
// kMinCallsBetweenRounds collectives of the size have run since the last (or since the first: a
// job's first collectives, cold, would mislead the trials) and added up to kRoundEverySeconds as
// the tuners price them: a change of state costs about that long, and a round, two collectives on
// each challenger, a few percent at most.
//
// Roles are set at issue, in issue order, alike on every rank (Next); which algorithm a role runs,
// and the times, are settled where the collectives execute, in that same order everywhere.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "algorithms/selector.h"
#include "deadline.h"
#include "op_kind.h"
#include "peers.h"

namespace weft {

class AlgorithmTrials {
 public:
  static constexpr double kRoundEverySeconds = 5e-3;
  static constexpr int kMinCallsBetweenRounds = 32;
  static constexpr int kTimesPerContender = 2;
  static constexpr int kMaxTrials = kTimesPerContender * (AlgorithmSelector::kMaxContenders - 1);
  // Sizes followed at once; beyond, a collective runs on the first state's choice.
  static constexpr size_t kMaxCalls = 256;

  // `enabled`: every rank shares this host's arena, where the ranks agree.
  explicit AlgorithmTrials(bool enabled = false) : enabled_(enabled) {}

  enum class Role {
    kFixed,      // the algorithm chosen at issue
    kIncumbent,  // runs on the fastest found so far, timed
    kTrial,      // a round's trial of a challenger
    kDecide,     // agrees on the round's times, then runs on the fastest
  };
  struct Plan {
    Role role = Role::kFixed;
    int trial = 0;  // kTrial: its place in the round
  };
  // At issue, under the communicator's issue lock: the part the next collective of `kind` and
  // `bytes` plays, `choice` being the selector's for it.
  Plan Next(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice);

  // Where the collectives execute, in issue order:
  // the algorithm a collective with `plan` runs (after Decide, for kDecide);
  AlgorithmId Algorithm(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice,
                        const Plan& plan) const;
  // collective `seq` with `plan` (kIncumbent, kTrial) ran from `start` to `end` on this rank
  // (seconds on a steady clock);
  void Record(OpKind kind, size_t bytes, const Plan& plan, uint64_t seq, double start, double end);
  // the round before is over: the ranks agree on the times and take the fastest contender.
  absl::Status Decide(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice,
                      Peers& peers, const Deadline& deadline);

  // For any thread (Communicator::AlgorithmFor): the fastest found so far, if a round has ended.
  std::optional<AlgorithmId> Found(OpKind kind, size_t bytes) const;

 private:
  using Call = std::pair<OpKind, size_t>;
  struct Issued {
    double seconds_since_round = 0;
    int calls_since_round = 0;
    int next_trial = -1;  // in a round: the trials issued so far
  };
  struct Timed {
    std::optional<AlgorithmId> fastest;
    int rounds = 0;  // decided: turns the order of the challengers
    // The incumbent's last times (a ring), and the round's trials' by place.
    std::array<double, kTimesPerContender> incumbent = {};
    int next_incumbent = 0;
    std::array<double, kMaxTrials> trials = {};
  };
  // The collective recorded last: its number, size and end.
  uint64_t last_seq_ = 0;
  Call last_call_;
  double last_end_ = 0;
  // The challenger trial `trial` of a round runs, `incumbent` holding: the contenders but it, in
  // mirrored order (C D D C), turned by one each round.
  static AlgorithmId Challenger(const AlgorithmSelector::Choice& choice, AlgorithmId incumbent,
                                int rounds, int trial);

  const bool enabled_;
  std::map<Call, Issued> issued_;  // under the issue lock
  mutable std::mutex mu_;          // guards timed_, the last collective's and decisions_
  std::map<Call, Timed> timed_;
  uint64_t decisions_ = 0;  // numbers the agreements' envelopes
};

}  // namespace weft
