#include "algorithms/algorithm_trials.h"

#include <algorithm>
#include <limits>

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
      issued.calls_since_round >= kMinCallsBetweenRounds) {
    issued.next_trial = 0;
    issued.seconds_since_round = 0;
    issued.calls_since_round = 0;
  }
  if (issued.next_trial >= 0 &&
      issued.next_trial < kTimesPerContender * (choice.contender_count - 1)) {
    return {Role::kTrial, issued.next_trial++};
  }
  issued.seconds_since_round += choice.fastest_s;
  ++issued.calls_since_round;
  if (issued.next_trial < 0) return {Role::kIncumbent};
  issued.next_trial = -1;
  return {Role::kDecide};
}

AlgorithmId AlgorithmTrials::Challenger(const AlgorithmSelector::Choice& choice,
                                        AlgorithmId incumbent, int rounds, int trial) {
  std::array<AlgorithmId, AlgorithmSelector::kMaxContenders> challengers;
  int count = 0;
  for (int i = 0; i < choice.contender_count; ++i) {
    if (choice.contenders[i] != incumbent) challengers[count++] = choice.contenders[i];
  }
  const int step = trial < count ? trial : 2 * count - 1 - trial;
  return challengers[(step + rounds) % count];
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

void AlgorithmTrials::Record(OpKind kind, size_t bytes, const Plan& plan, uint64_t seq,
                             double start, double end) {
  std::lock_guard<std::mutex> lock(mu_);
  const Call call{kind, bytes};
  const bool follows = seq == last_seq_ + 1 && last_call_ == call && last_end_ > 0;
  const double seconds = end - (follows ? std::min(start, last_end_) : start);
  last_seq_ = seq;
  last_call_ = call;
  last_end_ = end;
  Timed& timed = timed_[call];
  if (plan.role == Role::kTrial) {
    timed.trials[plan.trial] = seconds;
  } else {
    timed.incumbent[timed.next_incumbent] = seconds;
    timed.next_incumbent = (timed.next_incumbent + 1) % kTimesPerContender;
  }
}

absl::Status AlgorithmTrials::Decide(OpKind kind, size_t bytes,
                                     const AlgorithmSelector::Choice& choice, Peers& peers,
                                     const Deadline& deadline) {
  // The incumbent's times, then the trials': what every rank spent, the most of them agreed on.
  constexpr int kTimes = kTimesPerContender + kMaxTrials;
  std::array<double, kTimes> mine = {}, agreed = {};
  const int trials = kTimesPerContender * (choice.contender_count - 1);
  AlgorithmId incumbent;
  int rounds;
  uint64_t which;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Timed& timed = timed_[Call{kind, bytes}];
    std::copy(timed.incumbent.begin(), timed.incumbent.end(), mine.begin());
    std::copy(timed.trials.begin(), timed.trials.begin() + trials,
              mine.begin() + kTimesPerContender);
    incumbent = timed.fastest.value_or(choice.algorithm);
    rounds = timed.rounds;
    which = decisions_++;
  }
  CollectiveArgs args;
  args.kind = OpKind::kAllReduce;
  args.send = mine.data();
  args.recv = agreed.data();
  args.count = static_cast<size_t>(kTimesPerContender + trials);
  args.dtype = DataType::kFloat64;
  args.op = ReduceOp::kMax;
  peers.Begin(MakeEnvelope(args, AlgorithmId::kShmDirect, kAgreementSeqBase - which), deadline);
  if (absl::Status s = MakeAlgorithm(AlgorithmId::kShmDirect, peers, args)->Run(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("agreeing on the trials of ", Name(kind), " of ",
                                               bytes, " bytes: ", s.message()));
  }
  // Each contender's faster time; the incumbent keeps its place on a tie.
  std::map<AlgorithmId, double> fastest_time;
  fastest_time[incumbent] = std::min(agreed[0], agreed[1]);
  for (int trial = 0; trial < trials; ++trial) {
    const AlgorithmId challenger = Challenger(choice, incumbent, rounds, trial);
    auto [at, added] = fastest_time.try_emplace(challenger, agreed[kTimesPerContender + trial]);
    if (!added) at->second = std::min(at->second, agreed[kTimesPerContender + trial]);
  }
  AlgorithmId fastest = incumbent;
  for (const auto& [algorithm, seconds] : fastest_time) {
    if (seconds < fastest_time[fastest]) fastest = algorithm;
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
                            fastest_time[contender] * 1e6,
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
