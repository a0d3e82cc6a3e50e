#include "algorithms/algorithm_trials.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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
      issued.calls_since_round >= CallsBeforeRound(issued.rounds)) {
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
  const AlgorithmId incumbent =
      it == timed_.end() ? choice.algorithm : it->second.fastest.value_or(choice.algorithm);
  if (plan.role != Role::kTrial) return incumbent;
  return Challenger(choice, incumbent, it == timed_.end() ? 0 : it->second.rounds, plan.trial);
}

void AlgorithmTrials::Record(OpKind kind, size_t bytes, const AlgorithmSelector::Choice& choice,
                             const Plan& plan, uint64_t seq, double start, double end) {
  std::lock_guard<std::mutex> lock(mu_);
  const Call call{kind, bytes};
  const bool follows = seq == last_seq_ + 1 && last_call_ == call && last_end_ > 0 &&
                       start - last_end_ < kGapFactor * choice.fastest_s;
  const double seconds = end - (follows ? std::min(start, last_end_) : start);
  last_seq_ = seq;
  last_call_ = call;
  last_end_ = end;
  Timed& timed = timed_[call];
  if (plan.role == Role::kTrial) {
    timed.trials[plan.trial] = seconds;
  } else if (++timed.incumbent_calls > kColdCalls) {
    timed.incumbent_seconds += seconds;
    ++timed.incumbent_times;
  }
}

absl::Status AlgorithmTrials::Decide(OpKind kind, size_t bytes,
                                     const AlgorithmSelector::Choice& choice, Peers& peers,
                                     const Deadline& deadline) {
  // The incumbent's collectives since the round before (none: it never ran timed) and their
  // time, then each challenger's block's: what each rank spent, the most of them agreed on, so
  // every rank decides alike.
  const int block = TimesPerContender(choice);
  const int challengers = choice.contender_count - 1;
  std::array<double, AlgorithmSelector::kMaxContenders + 1> mine = {}, agreed = {};
  AlgorithmId incumbent;
  int rounds;
  uint64_t which;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Timed& timed = timed_[Call{kind, bytes}];
    mine[0] = timed.incumbent_times;
    mine[1] = timed.incumbent_seconds;
    timed.incumbent_times = 0;
    timed.incumbent_seconds = 0;
    for (int b = 0; b < challengers; ++b) {
      mine[2 + b] = std::accumulate(timed.trials.begin() + b * block + kWarmingTrials,
                                    timed.trials.begin() + (b + 1) * block, 0.0);
    }
    incumbent = timed.fastest.value_or(choice.algorithm);
    rounds = timed.rounds;
    which = decisions_++;
  }
  CollectiveArgs args;
  args.kind = OpKind::kAllReduce;
  args.send = mine.data();
  args.recv = agreed.data();
  args.count = static_cast<size_t>(2 + challengers);
  args.dtype = DataType::kFloat64;
  args.op = ReduceOp::kMax;
  peers.Begin(MakeEnvelope(args, AlgorithmId::kShmDirect, kAgreementSeqBase - which), deadline);
  if (absl::Status s = MakeAlgorithm(AlgorithmId::kShmDirect, peers, args)->Run(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("agreeing on the trials of ", Name(kind), " of ",
                                               bytes, " bytes: ", s.message()));
  }
  // Each contender's mean: the incumbent's over the collectives since the round before, which a
  // block of a few could not stand for (the host's pace changes from one stretch of them to the
  // next), the challengers' over their blocks. The incumbent keeps its place on a tie.
  std::map<AlgorithmId, double> mean_time;
  mean_time[incumbent] = agreed[0] > 0 ? agreed[1] / agreed[0] : 0;
  for (int b = 0; b < challengers; ++b) {
    mean_time[Challenger(choice, incumbent, rounds, b * block)] =
        agreed[2 + b] / (block - kWarmingTrials);
  }
  AlgorithmId fastest = incumbent;
  for (const auto& [algorithm, seconds] : mean_time) {
    if (seconds < mean_time[fastest]) fastest = algorithm;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Timed& timed = timed_[Call{kind, bytes}];
    timed.fastest = fastest;
    ++timed.rounds;
  }
  // At INFO the decisions that change the algorithm, at TRACE every one.
  const DebugLevel level = fastest == incumbent ? DebugLevel::kTrace : DebugLevel::kInfo;
  if (peers.rank() == 0 && DebugEnabled(level)) {
    std::string times;
    for (int i = 0; i < choice.contender_count; ++i) {
      const AlgorithmId contender = choice.contenders[i];
      absl::StrAppendFormat(&times, "%s%s %.1f us%s", i == 0 ? "" : ", ", Name(contender),
                            mean_time[contender] * 1e6,
                            contender == incumbent ? " (incumbent)" : "");
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
