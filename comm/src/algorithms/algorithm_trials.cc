#include "algorithms/algorithm_trials.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/algorithm.h"
#include "log.h"

namespace weft {
namespace {

// The agreements number their envelopes from here down, apart from the operations' (counted up
// from 0) and calibration's (from ~0 down).
constexpr uint64_t kAgreementSeqBase = uint64_t{1} << 62;

}  // namespace

AlgorithmTrials::Plan AlgorithmTrials::Next(OpKind kind, size_t bytes,
                                            const AlgorithmSelector::Choice& choice) {
  if (!enabled_ || choice.contender_count < 2) return {};
  auto [it, added] = issued_.try_emplace(Call{kind, bytes});
  if (added && issued_.size() > kMaxCalls) {
    issued_.erase(it);
    return {};
  }
  Issued& issued = it->second;
  if (issued.next_trial < 0 && issued.seconds_since_round >= kRoundEverySeconds &&
      issued.calls_since_round >= CallsBeforeRound(issued.rounds, choice.fastest_s)) {
    ++issued.rounds;
    issued.next_trial = 0;
    issued.seconds_since_round = 0;
    issued.calls_since_round = 0;
  }
  if (issued.next_trial >= 0 &&
      issued.next_trial < TimesPerContender(choice) * (choice.contender_count - 1)) {
    return {Role::kTrial, issued.next_trial++};
  }
  issued.seconds_since_round += choice.fastest_s;
  ++issued.calls_since_round;
  if (issued.next_trial < 0) return {Role::kIncumbent};
  issued.next_trial = -1;
  return {Role::kDecide};
}

int AlgorithmTrials::CallsBeforeRound(int round, double fastest_s) {
  const double first =
      fastest_s > 0 ? std::ceil(kFirstRoundSeconds / fastest_s) : kMostCallsBeforeFirstRound;
  const int calls = static_cast<int>(
      std::clamp<double>(first, kLeastCallsBeforeFirstRound, kMostCallsBeforeFirstRound));
  return calls << std::min(round, kRoundSpacingDoublings);
}

int AlgorithmTrials::TimesPerContender(const AlgorithmSelector::Choice& choice) {
  const double times =
      choice.fastest_s > 0 ? std::ceil(kBlockSeconds / choice.fastest_s) : kMaxTimesPerContender;
  return static_cast<int>(std::clamp<double>(times, kMinTimesPerContender, kMaxTimesPerContender));
}

AlgorithmId AlgorithmTrials::Challenger(const AlgorithmSelector::Choice& choice,
                                        AlgorithmId incumbent, int rounds, int trial) {
  std::array<AlgorithmId, AlgorithmSelector::kMaxContenders> challengers;
  int count = 0;
  for (int i = 0; i < choice.contender_count; ++i) {
    if (choice.contenders[i] != incumbent) challengers[count++] = choice.contenders[i];
  }
  return challengers[(trial / TimesPerContender(choice) + rounds) % count];
}

AlgorithmId AlgorithmTrials::Algorithm(OpKind kind, size_t bytes,
                                       const AlgorithmSelector::Choice& choice,
                                       const Plan& plan) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timed_.find(Call{kind, bytes});
  static const Timed kNoneYet;
  const Timed& timed = it == timed_.end() ? kNoneYet : it->second;
  if (plan.role == Role::kTrial) return timed.TrialRuns(choice, plan.trial);
  return timed.fastest.value_or(choice.algorithm);
}

void AlgorithmTrials::Record(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice,
                             const Plan& plan, bool in_place, uint64_t seq, double start,
                             double end) {
  std::lock_guard<std::mutex> lock(mu_);
  const Call call{kind, bytes};
  const bool follows = seq == last_seq_ + 1 && last_call_ == call && last_end_ > 0 &&
                       start - last_end_ < std::min(kGapFactor * choice.fastest_s, kMaxGapSeconds);
  const double seconds = end - (follows ? std::min(start, last_end_) : start);
  last_seq_ = seq;
  last_call_ = call;
  last_end_ = end;
  // A decision's own collective is no sample (it ran after the agreement, without the skew the
  // agreement absorbed), but the one after it follows it.
  if (plan.role == Role::kDecide) return;
  Timed& timed = timed_[call];
  if (plan.role == Role::kTrial &&
      timed.TrialRuns(choice, plan.trial) != timed.fastest.value_or(choice.algorithm)) {
    const int block = TimesPerContender(choice);
    if (plan.trial % block >= kWarmingTrials) {
      timed.blocks[plan.trial / block].Add(in_place, follows, seconds);
    }
  } else if (++timed.incumbent_calls > ColdCalls(choice.fastest_s)) {
    timed.incumbent.Add(in_place, follows, seconds);
  }
}

absl::Status AlgorithmTrials::Decide(OpKind kind, size_t bytes,
                                     const AlgorithmSelector::Choice& choice, Peers& peers,
                                     const Deadline& deadline) {
  // The incumbent's collectives since the round before (none: it never ran timed) and their
  // time, then each challenger's block's, by placement and by whether they followed the one
  // before: what each rank spent, the most of them agreed on, so every rank decides alike.
  const int challengers = choice.contender_count - 1;
  constexpr int kPerTimes = 8;
  constexpr size_t kMostNumbers = kPerTimes * AlgorithmSelector::kMaxContenders;
  std::array<double, kMostNumbers> mine = {}, agreed = {};
  const auto put = [&](int at, const Times& times) {
    for (int i = 0; i < 4; ++i) {
      mine[kPerTimes * at + 2 * i] = times.count[i / 2][i % 2];
      mine[kPerTimes * at + 2 * i + 1] = times.seconds[i / 2][i % 2];
    }
  };
  const auto get = [&](int at) {
    Times times;
    for (int i = 0; i < 4; ++i) {
      times.count[i / 2][i % 2] = static_cast<int>(agreed[kPerTimes * at + 2 * i]);
      times.seconds[i / 2][i % 2] = agreed[kPerTimes * at + 2 * i + 1];
    }
    return times;
  };
  AlgorithmId incumbent;
  int rounds;
  uint64_t which;
  std::map<AlgorithmId, Past> past;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Timed& timed = timed_[Call{kind, bytes}];
    put(0, timed.incumbent);
    for (int b = 0; b < challengers; ++b) put(1 + b, timed.blocks[b]);
    timed.incumbent = {};
    timed.blocks = {};
    incumbent = timed.fastest.value_or(choice.algorithm);
    rounds = timed.rounds;
    past = timed.past;
    which = decisions_++;
  }
  CollectiveArgs args;
  args.kind = OpKind::kAllReduce;
  args.send = mine.data();
  args.recv = agreed.data();
  args.count = static_cast<size_t>(kPerTimes * (1 + challengers));
  args.dtype = DataType::kFloat64;
  args.op = ReduceOp::kMax;
  peers.Begin(MakeEnvelope(args, AlgorithmId::kShmDirect, kAgreementSeqBase - which), deadline);
  if (absl::Status s = MakeAlgorithm(AlgorithmId::kShmDirect, peers, args)->Run(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("agreeing on the trials of ", Name(kind), " of ",
                                               bytes, " bytes: ", s.message()));
  }
  // Each contender's mean over the incumbent's collectives since the round before, which a block
  // of a few could not stand for (the host's pace changes from one stretch of them to the next):
  // the incumbent's own, and for a challenger that mean scaled by how its block compares with
  // them, like with like. In each placement the incumbent ran: the collectives that followed the
  // one before, where both have such, else those that did not, where both have those, never the
  // one kind against the other. A loop's first collective waits on the ranks' skew, which the
  // ones after it hide: a 64 MiB all-reduce took 18 ms by shm_direct alone, 11-12 in loops. The
  // placements are weighed as the incumbent's collectives were, and a challenger whose block
  // missed one of them (or had none of their kind there) is priced there by its last block that
  // had it, against the incumbent's collectives of that round, or of the next where that round's
  // had none; with none, it stays out. The incumbent keeps its place on a tie.
  const Times window = get(0);
  const int window_calls = window.Calls(0) + window.Calls(1);
  const double window_mean =
      window_calls > 0 ? (window.Seconds(0) + window.Seconds(1)) / window_calls : 0;
  std::map<AlgorithmId, double> mean_time;
  mean_time[incumbent] = window_mean;
  std::vector<AlgorithmId> sat_out;
  for (int b = 0; b < challengers; ++b) {
    const AlgorithmId challenger =
        Challenger(choice, incumbent, rounds, b * TimesPerContender(choice));
    Past& its_past = past[challenger];
    if (its_past.SitsOutAfter(rounds)) {
      mean_time[challenger] = std::numeric_limits<double>::infinity();
      sat_out.push_back(challenger);
      continue;
    }
    const Times block = get(1 + b);
    double theirs = 0, ours = 0;  // the window as the challenger would take it, as it took it
    bool priced = window_calls > 0;
    for (int p = 0; p < 2; ++p) {
      const int weight = window.Calls(p);
      const bool timed = block.Calls(p) > 0;
      // Like with like: those that followed the one before on both sides, else those that did
      // not, else none (a window of loops' first collectives against a block within a loop).
      const int alike = window.Calls(p, 1) > 0 && block.Calls(p, 1) > 0   ? 1
                        : window.Calls(p, 0) > 0 && block.Calls(p, 0) > 0 ? 0
                                                                          : -1;
      if (timed && (weight == 0 || alike < 0) && block.Calls(p, 1) > 0) {
        its_past.unmatched[p] = block.Mean(p, 1);
      }
      if (weight == 0) continue;
      if (timed && alike >= 0) {
        its_past.ratio[p] = block.Mean(p, alike) / window.Mean(p, alike);
        its_past.unmatched[p] = 0;
      } else if (!timed && its_past.unmatched[p] > 0 && window.Calls(p, 1) > 0) {
        its_past.ratio[p] = its_past.unmatched[p] / window.Mean(p, 1);
        its_past.unmatched[p] = 0;
      }
      const double incumbents = window.Mean(p);
      priced = priced && its_past.ratio[p] > 0;
      theirs += weight * its_past.ratio[p] * incumbents;
      ours += weight * incumbents;
    }
    if (!priced || ours <= 0) {
      mean_time[challenger] = std::numeric_limits<double>::infinity();
      continue;
    }
    mean_time[challenger] = window_mean * theirs / ours;
    if (theirs >= kSitOutFactor * ours) {
      its_past.last_rounds_out =
          std::min(its_past.last_rounds_out > 0 ? 2 * its_past.last_rounds_out : 1, kMostRoundsOut);
      its_past.back_in_round = rounds + 1 + its_past.last_rounds_out;
    } else {
      its_past.last_rounds_out = 0;
    }
  }
  AlgorithmId fastest = incumbent;
  for (const auto& [algorithm, seconds] : mean_time) {
    if (seconds < mean_time[fastest]) fastest = algorithm;
  }
  if (fastest != incumbent) {
    // Against the new incumbent: each ratio over its own, where it has one.
    const std::array<double, 2> its = past[fastest].ratio;
    for (auto& [algorithm, was] : past) {
      for (int p = 0; p < 2; ++p) was.ratio[p] = its[p] > 0 ? was.ratio[p] / its[p] : 0;
    }
    for (int p = 0; p < 2; ++p) past[incumbent].ratio[p] = its[p] > 0 ? 1 / its[p] : 0;
    past.erase(fastest);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Timed& timed = timed_[Call{kind, bytes}];
    timed.fastest = fastest;
    timed.past = std::move(past);
    ++timed.rounds;
  }
  // At INFO the decisions that change the algorithm, at TRACE every one.
  const DebugLevel level = fastest == incumbent ? DebugLevel::kTrace : DebugLevel::kInfo;
  if (peers.rank() == 0 && DebugEnabled(level)) {
    std::string times;
    for (int i = 0; i < choice.contender_count; ++i) {
      const AlgorithmId contender = choice.contenders[i];
      const double seconds = mean_time[contender];
      std::string took = absl::StrFormat("%.1f us", seconds * 1e6);
      if (contender == incumbent) {
        absl::StrAppend(&took, " (incumbent)");
      } else if (std::find(sat_out.begin(), sat_out.end(), contender) != sat_out.end()) {
        took = "(sat out)";
      } else if (std::isinf(seconds)) {
        took = "(not timed in each placement)";
      }
      absl::StrAppend(&times, i == 0 ? "" : ", ", Name(contender), " ", took);
    }
    DebugLog(level, absl::StrCat("rank 0: trials: ", Name(kind), " of ", bytes, " bytes took ",
                                 times, ": ", Name(fastest), " from now on"));
  }
  return absl::OkStatus();
}

std::optional<AlgorithmId> AlgorithmTrials::Found(OpKind kind, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timed_.find(Call{kind, bytes});
  return it == timed_.end() ? std::nullopt : it->second.fastest;
}

}  // namespace weft
