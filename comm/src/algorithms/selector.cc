#include "algorithms/selector.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "log.h"

namespace weft {
namespace {

// Bounds the memory of the decisions a communicator remembers (a job with ever-changing sizes).
constexpr size_t kRememberedDecisions = 4096;

constexpr OpKind kCollectives[] = {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather,
                                   OpKind::kBroadcast, OpKind::kReduce,        OpKind::kAllToAll,
                                   OpKind::kBarrier};

std::optional<OpKind> ParseCollective(absl::string_view name) {
  for (OpKind kind : kCollectives) {
    if (name == Name(kind)) return kind;
  }
  return std::nullopt;
}

absl::Status UnknownAlgorithm(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm '", name,
      "' in WEFT_ALGO; known: ring, rabenseifner, recursive_doubling (rd), shm_direct, "
      "cma_direct, tree, pairwise, dissemination, hierarchical (hier)"));
}

}  // namespace

absl::StatusOr<AlgorithmSelector> AlgorithmSelector::Create(absl::string_view spec) {
  AlgorithmSelector selector;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    // "auto" forces nothing: a way to ask for the tuner where WEFT_ALGO would force otherwise.
    if (item == "auto") continue;
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
    if (kv.second.empty()) {
      std::optional<AlgorithmId> id = ParseAlgorithm(kv.first);
      if (!id) return UnknownAlgorithm(kv.first);
      selector.forced_all_ = *id;
      continue;
    }
    std::optional<OpKind> kind = ParseCollective(kv.first);
    if (!kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown collective '", kv.first,
          "' in WEFT_ALGO; known: all_reduce, reduce_scatter, all_gather, broadcast, reduce, "
          "all_to_all, barrier"));
    }
    std::optional<AlgorithmId> id = ParseAlgorithm(kv.second);
    if (!id) return UnknownAlgorithm(kv.second);
    if (!Implements(*id, *kind)) {
      return absl::InvalidArgumentError(
          absl::StrCat("WEFT_ALGO: ", kv.second, " does not implement ", kv.first));
    }
    selector.forced_[*kind] = *id;
  }
  return selector;
}

void AlgorithmSelector::SetTuners(std::vector<std::shared_ptr<const Tuner>> tuners) {
  tuners_ = std::move(tuners);
  decided_ = std::make_shared<Decided>();
}

uint64_t AlgorithmSelector::PackDecision(OpKind kind, size_t bytes, AlgorithmId id) {
  static_assert(sizeof(OpKind) == 2);
  if (bytes >= uint64_t{1} << 40) return kNoDecision;
  return (uint64_t{bytes} << 24) | (uint64_t{static_cast<uint16_t>(kind)} << 8) |
         static_cast<uint8_t>(id);
}

std::optional<AlgorithmId> AlgorithmSelector::Forced(OpKind kind) const {
  // Most jobs force nothing per collective: skip the lookup, which every call would pay.
  if (!forced_.empty()) {
    if (auto it = forced_.find(kind); it != forced_.end()) return it->second;
  }
  if (forced_all_ && Implements(*forced_all_, kind)) return forced_all_;
  return std::nullopt;
}

absl::Status AlgorithmSelector::CheckForced(const Peers& peers, absl::string_view transport) const {
  for (OpKind kind : kCollectives) {
    const std::optional<AlgorithmId> forced = Forced(kind);
    if (!forced) continue;
    if (std::string why = Unusable(*forced, peers, transport); !why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("WEFT_ALGO forces ", Name(*forced), " for ", Name(kind),
                       ", but it cannot run on this communicator: ", why));
    }
  }
  return absl::OkStatus();
}

AlgorithmSelector::Choice AlgorithmSelector::Choose(OpKind kind, size_t bytes,
                                                    const Peers& peers) const {
  const std::optional<AlgorithmId> forced = Forced(kind);
  // Only a one-rank communicator gets here with one that cannot run (CheckForced).
  if (forced && Usable(*forced, peers)) return {*forced};
  // The packed call with algorithm 0: the latest decision's key part if it was for this call.
  const uint64_t key = PackDecision(kind, bytes, AlgorithmId{});
  const uint64_t latest = decided_->latest.load(std::memory_order_relaxed);
  if (key != kNoDecision && (latest & ~uint64_t{0xff}) == key) {
    return {static_cast<AlgorithmId>(latest & 0xff)};
  }
  const std::pair<OpKind, size_t> call{kind, bytes};
  const auto remember = [&](const Choice& choice) {
    if (choice.contender_count == 0) {
      decided_->latest.store(PackDecision(kind, bytes, choice.algorithm),
                             std::memory_order_relaxed);
    }
    return choice;
  };
  {
    std::lock_guard<std::mutex> lock(decided_->mu);
    if (auto it = decided_->by_call.find(call); it != decided_->by_call.end()) {
      return remember(it->second);
    }
  }
  const TuningShape shape = TuningShape::Of(peers);
  Choice choice;
  choice.fastest_s = std::numeric_limits<double>::infinity();
  const auto contend = [&](AlgorithmId id) {
    const auto end = choice.contenders.begin() + choice.contender_count;
    if (std::find(choice.contenders.begin(), end, id) == end &&
        choice.contender_count < kMaxContenders) {
      choice.contenders[choice.contender_count++] = id;
    }
  };
  // (price over the state's choice's, algorithm); trials run only where the ranks share a host.
  std::vector<std::pair<double, AlgorithmId>> near;
  for (size_t state = 0; state < tuners_.size(); ++state) {
    const TunerChoice chosen = tuners_[state]->Choose(kind, bytes, shape);
    if (state == 0) choice.algorithm = chosen.algorithm;
    choice.fastest_s = std::min(choice.fastest_s, chosen.predicted_s);
    contend(chosen.algorithm);
    if (!shape.arena || chosen.predicted_s <= 0) continue;
    for (const TunerChoice& priced : tuners_[state]->Priced(kind, bytes, shape)) {
      const double ratio = priced.predicted_s / chosen.predicted_s;
      if (priced.algorithm != chosen.algorithm && ratio <= kNearFactor) {
        near.emplace_back(ratio, priced.algorithm);
      }
    }
  }
  std::sort(near.begin(), near.end());
  for (const auto& [ratio, id] : near) contend(id);
  if (choice.contender_count < 2 || choice.fastest_s < kMinContestedSeconds) {
    choice.contender_count = 0;
    choice.fastest_s = 0;
  }
  {
    std::lock_guard<std::mutex> lock(decided_->mu);
    if (decided_->by_call.size() >= kRememberedDecisions) decided_->by_call.clear();
    decided_->by_call.emplace(call, choice);
  }
  remember(choice);
  if (!DebugEnabled(DebugLevel::kInfo)) return choice;
  if (forced) {
    DebugLog(DebugLevel::kInfo,
             absl::StrCat("rank ", peers.rank(), ": WEFT_ALGO asks for ", Name(*forced), " for ",
                          Name(kind), " but this communicator has one rank; using ",
                          Name(choice.algorithm)));
  }
  // Every rank decides alike: rank 0 speaks for them, once per collective and size class.
  if (peers.rank() == 0) {
    const int size_class = bytes == 0 ? -1 : 63 - __builtin_clzll(bytes);
    bool first;
    {
      std::lock_guard<std::mutex> lock(printed_->mu);
      first = printed_->seen.emplace(kind, size_class).second;
    }
    if (first) {
      DebugLog(DebugLevel::kInfo, absl::StrCat("rank 0: tuner: ", Explain(kind, bytes, peers)));
    }
  }
  return choice;
}

double AlgorithmSelector::Predict(AlgorithmId algorithm, OpKind kind, size_t bytes,
                                  const Peers& peers) const {
  return tuners_.front()->Predict(algorithm, kind, bytes, TuningShape::Of(peers));
}

std::string AlgorithmSelector::Explain(OpKind kind, size_t bytes, const Peers& peers) const {
  const TuningShape shape = TuningShape::Of(peers);
  std::string explained = tuners_.front()->Explain(kind, bytes, shape);
  const std::optional<AlgorithmId> forced = Forced(kind);
  if (forced && Usable(*forced, peers)) {
    return absl::StrCat("WEFT_ALGO forces ", Name(*forced), "; the tuner would say: ", explained);
  }
  const Choice choice = Choose(kind, bytes, peers);
  if (choice.contender_count > 1) {
    absl::StrAppend(
        &explained, "; the job times ",
        absl::StrJoin(choice.contenders.begin(), choice.contenders.begin() + choice.contender_count,
                      ", ", [](std::string* out, AlgorithmId id) { out->append(Name(id)); }),
        absl::StrFormat(" (a state of the host chooses each, or prices it within %gx of its "
                        "choice)",
                        kNearFactor));
  }
  return explained;
}

}  // namespace weft
