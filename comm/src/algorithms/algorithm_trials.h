// AlgorithmTrials: which of the algorithms the models cannot tell apart runs a collective fastest
// now, found by timing each on the job's own collectives.
//
// A host can run in lasting states that rank the direct algorithms differently (a VM whose vCPUs
// the hypervisor moves between cores that share more or less cache), and its cache keeps a model
// of each (tuner_calibration.h). Creation's recheck finds the state a job starts in, but that VM
// also left it within a second in a quarter to a third of its jobs, and its states are points of a
// drift more than a few fixed settings: a probe priced against the models put a job in its slow
// state while shm_direct ran 3.5x faster than the slow state's choice right beside it. So where
// the states' tuners disagree on a collective's algorithm, or a state prices another near its
// choice (the selector's contenders), the job asks the machine, on its own collectives of that
// kind and size.
//
// The incumbent (at first the first state's choice) runs them, timed. Every so often a round of
// trials runs the next ones on each challenger (the other contenders) in turn, a block of
// TimesPerContender each; the collective after the round begins with the ranks agreeing on the
// times, and it and every one after it run on the contender with the least mean: the
// incumbent's over its collectives since the round before, a challenger's over its block.
//
// What is timed:
// - A collective's time is the most any rank spent on it (a tiny all-reduce of the maximum,
//   exact, so every rank holds the same numbers): in a loop the rank that starts first waits for
//   the others.
// - Spent on it: from the end of the one before, where that was the previous collective, of the
//   same size, and ended less than kGapFactor times its price (and kMaxGapSeconds) before this one
//   started; else from its own start. In a loop of 512 KiB all-reduces on shm_direct each took
//   40 us from its start, 71 us from the one before (cma_direct: 115 either way): shm_direct
//   leaves part of its cost to the next collective, and timed from its own start it would have
//   won rounds it lost.
// - Means, not the fastest of two: a loop's pace is its collectives' mean, and a 64 KiB
//   all-gather on cma_direct took 7-10 us at best of two, against 20 on average in the loop
//   (shm_direct: 9-14 at best, 15 on average). The incumbent's mean covers all its collectives
//   since the round before (past a size's first ColdCalls), since the pace changes from one
//   stretch of a few to the next: cma_direct's means of the 8 before a round came to 7-11 us in
//   that loop.
// - A block lasts kBlockSeconds as priced, kMinTimesPerContender to kMaxTimesPerContender
//   collectives; its first kWarmingTrials pay for the switch and are left out of its mean.
// - Like with like. In place and out of place apart (CollectiveArgs::in_place), since they rank
//   the algorithms differently, and a benchmark runs loops of each by turns: a challenger's
//   means in each are weighed as the incumbent's collectives were. Where its block missed a
//   placement they had (or had none of their kind there, below), its last block in that
//   placement stands in, as it compared with the incumbent's collectives there in its round;
//   with none, it is not taken. A 16 MiB all-gather's block of cma_direct in place (2.9 ms)
//   against shm_direct's collectives in and out of place (also 2.9) put cma_direct on the loops
//   out of place at 4.2 ms, where shm_direct took 2.3. And in each placement the collectives that
//   followed the one before apart, where both sides have such, else those that did not, where both
//   have those, never the one kind against the other: a block's follow each other, and a loop's
//   first collective also waits on the ranks' skew, which the ones after it hide (a 64 MiB
//   all-reduce by shm_direct took 18 ms alone, 11-12 in loops of 5). Weighed against nothing but
//   loops' first collectives in place, a block of cma_direct 64 MiB all-gathers within a loop took
//   cma_direct for loops it then ran at 1.5-1.9x shm_direct's time. The collective after a decision
//   follows it (the decision's own, run after the agreement, is no sample).
//
// When: once the collectives of the size since the last round (or since the first: a job's first
// collectives, cold, would mislead the trials) have added up to kRoundEverySeconds as the tuners
// price them, a change of state costing about that long, and number CallsBeforeRound: 64,
// doubling to 512 as rounds go by (from 8 where each is priced at 4 ms or more, so that a
// benchmark's run of a few dozen large collectives has rounds). A round costs a block on each
// slower challenger, which a contender priced within 2.5x of the choice (selector.h) makes up to
// 15 collectives' time for a block of 10: where the count sets the pace, 23% of 64 collectives
// at first, 2.9% of 512 later (large sizes, in blocks of 4 after 8: 75% at first, 9% of 64);
// a challenger that far behind sits the next rounds out (kSitOutFactor).
// Collectives that run on the caller's thread as they are issued (shm_direct's line rounds) take
// no part (communicator.cc).
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
  // The collectives of a size before its first round: kMostCallsBeforeFirstRound, or as many as
  // take kFirstRoundSeconds as priced where that is fewer, but kLeastCallsBeforeFirstRound. A
  // benchmark's run of 64 MiB all-reduces is some 30 collectives, 5 a loop: counted in 64 the
  // trials never began there, and the model's pick held in a state it mispriced (cma_direct at
  // 26-32 ms a collective, where shm_direct took 18-20).
  static constexpr int kMostCallsBeforeFirstRound = 64;
  static constexpr int kLeastCallsBeforeFirstRound = 8;
  static constexpr double kFirstRoundSeconds = 32e-3;
  // Before each later round, the spacing before the one before it, doubled, up to
  // kRoundSpacingDoublings times.
  static constexpr int kRoundSpacingDoublings = 3;
  static int CallsBeforeRound(int round, double fastest_s);
  static constexpr double kBlockSeconds = 1e-3;
  // At least two timed past the switch (kWarmingTrials).
  static constexpr int kMinTimesPerContender = 4;
  static constexpr int kMaxTimesPerContender = 10;
  // The collectives in each contender's block, alike on every rank (every rank prices alike).
  static int TimesPerContender(const AlgorithmSelector::Choice& choice);
  // A collective that starts this many times fastest_s or more after the one before ended
  // waited on the caller, not on what that one left: it is timed from its own start. A benchmark
  // that refills its input between warm-up and timed loop took 14 ms there, which one 512 KiB
  // reduce-scatter timed from the collective before would have charged to shm_direct.
  static constexpr double kGapFactor = 10;
  // Nor, whatever the price, a gap of this long or more: a loop's own gaps (the caller waking to
  // issue the next) last tens of microseconds, 31 on average in that loop, where a benchmark's
  // check and refill between loops of 256 MiB all-reduces took some 250 ms, under 10x their
  // price: 12% on a mean of 32 of them, 3.7x on a mean of 2 (324 ms against loops of 67).
  static constexpr double kMaxGapSeconds = 1e-3;
  // A block's first trials, left out of its mean: they pay for the switch. A 512 KiB
  // reduce-scatter's first shm_direct after cma_direct took 538 us, the next 60-80. Where the
  // switch costs less than a collective it lands on the second: the first, timed from the end of
  // the incumbent's last, leaves its own cold start to the one after it, as shm_direct leaves
  // part of each collective to the next. In 39 blocks of 128 KiB all-gathers on shm_direct after
  // cma_direct the second took a median 1.95x the later ones' mean, and counted in, it put the
  // block a median 14% over them (up to 43%): the trials kept cma_direct on all-gathers that
  // shm_direct ran 10-15% faster.
  static constexpr int kWarmingTrials = 2;
  // A size's first collectives, left out of the incumbent's mean: half those before the first
  // round. 2 MiB all-gathers on shm_direct took 371 us on average over their first 64, page
  // faults and all, and 160-190 in loops after.
  static int ColdCalls(double fastest_s) { return CallsBeforeRound(0, fastest_s) / 2; }
  // A challenger whose mean comes to kSitOutFactor times the incumbent's or more sits out the
  // next round, and twice as many rounds as the last time out for each time after in a row, up to
  // kMostRoundsOut: a block of 10 on a challenger 3x slower costs 20 collectives' time, a tenth
  // of a benchmark's loop of 200 when there is a round in it, while one that slow is not likely to
  // win the next.
  static constexpr double kSitOutFactor = 2;
  static constexpr int kMostRoundsOut = 8;
  // Sizes followed at once; beyond, a collective runs on the first state's choice.
  static constexpr size_t kMaxCalls = 256;

  // `enabled`: every rank shares this host's arena, where the ranks agree. Not across hosts: on
  // the rig (2 x 2 ranks, 1 Gbit/s) trials there, agreeing by recursive doubling, could take
  // almost no challenger in a benchmark's loops of 200 (a round's window spans both placements,
  // a block one), and with their rounds the tuned loops of tree broadcasts ran 1.11-1.17x forced
  // tree's: 34 of 40 sizes within 1.1x of the best, against 38 without them.
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
  // collective `seq` with `plan` (kIncumbent, kTrial), in place or not (CollectiveArgs), ran
  // from `start` to `end` on this rank (seconds on a steady clock);
  void Record(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice, const Plan& plan,
              bool in_place, uint64_t seq, double start, double end);
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
    int rounds = 0;       // begun
    int next_trial = -1;  // in a round: the trials issued so far
  };
  // Collectives timed and their seconds by [in place][following the one before].
  struct Times {
    std::array<std::array<int, 2>, 2> count = {};
    std::array<std::array<double, 2>, 2> seconds = {};
    void Add(bool in_place, bool follows, double took) {
      ++count[in_place][follows];
      seconds[in_place][follows] += took;
    }
    // Of the collectives in placement `p` that followed the one before (`following` 1), did not
    // (0), or all (-1): their number, their seconds, and their mean (0 where there are none).
    int Calls(int p, int following = -1) const {
      return following >= 0 ? count[p][following] : count[p][0] + count[p][1];
    }
    double Seconds(int p, int following = -1) const {
      return following >= 0 ? seconds[p][following] : seconds[p][0] + seconds[p][1];
    }
    double Mean(int p, int following = -1) const {
      const int calls = Calls(p, following);
      return calls > 0 ? Seconds(p, following) / calls : 0.0;
    }
  };
  // By placement, 0 where there is none.
  struct Past {
    // The block's mean over the incumbent's collectives in its round (or the next, where that
    // round's had none in the placement).
    std::array<double, 2> ratio = {};
    // The block's mean, where its round's collectives had none in the placement, until the next
    // round's do.
    std::array<double, 2> unmatched = {};
    // It sits out the rounds before this one, and sat out this many at its last turn out.
    int back_in_round = 0;
    int last_rounds_out = 0;
    // Whether it sits out the round after `rounds` decided.
    bool SitsOutAfter(int rounds) const { return rounds < back_in_round; }
  };
  struct Timed {
    std::optional<AlgorithmId> fastest;
    int rounds = 0;  // decided: turns the order of the challengers
    // The incumbent's collectives since the round before (past the first ColdCalls ever), and
    // each challenger's block in the round (but its first kWarmingTrials).
    int incumbent_calls = 0;
    Times incumbent;
    std::array<Times, AlgorithmSelector::kMaxContenders - 1> blocks;
    // What each challenger's last block in each placement found, to price a placement that a
    // later round's block missed. A benchmark's loops of large collectives, out of place then in
    // place, are shorter than a round, so a round's collectives have both placements where a
    // block has one.
    std::map<AlgorithmId, Past> past;
    // Whether `challenger` sits out the round after the last decided.
    bool SitsOut(AlgorithmId challenger) const {
      auto it = past.find(challenger);
      return it != past.end() && it->second.SitsOutAfter(rounds);
    }
    // What trial `trial` of that round runs: its challenger, or the incumbent where that sits
    // out (and the trial counts as a collective of the incumbent's).
    AlgorithmId TrialRuns(const AlgorithmSelector::Choice& choice, int trial) const {
      const AlgorithmId incumbent = fastest.value_or(choice.algorithm);
      const AlgorithmId challenger = Challenger(choice, incumbent, rounds, trial);
      return SitsOut(challenger) ? incumbent : challenger;
    }
  };
  // The collective recorded last: its number, size and end.
  uint64_t last_seq_ = 0;
  Call last_call_;
  double last_end_ = 0;
  // The challenger trial `trial` of a round runs, `incumbent` holding: the contenders but it, a
  // block each, in an order turned by one each round.
  static AlgorithmId Challenger(const AlgorithmSelector::Choice& choice, AlgorithmId incumbent,
                                int rounds, int trial);

  const bool enabled_;
  std::map<Call, Issued> issued_;  // under the issue lock
  mutable std::mutex mu_;          // guards timed_, the last collective's and decisions_
  std::map<Call, Timed> timed_;
  uint64_t decisions_ = 0;  // numbers the agreements' envelopes
};

}  // namespace weft
