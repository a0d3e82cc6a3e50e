#include "algorithms/selector.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "log.h"

namespace weft {
namespace {

// Bounds the memory of the decisions a communicator remembers (a job with ever-changing sizes).
constexpr size_t kRememberedDecisions = 4096;

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
    std::optional<OpKind> kind = CollectiveNamed(kv.first);
    if (!kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown collective '", kv.first,
          "' in WEFT_ALGO; known: all_reduce, reduce_scatter, all_gather, broadcast, reduce, "
          "all_to_all, barrier, all_gather_v, reduce_scatter_v, all_to_all_v"));
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

void AlgorithmSelector::SetTuner(CostModel model, CommLayout layout, int rank) {
  tuner_ = std::make_shared<CostTuner>(std::move(model));
  layout_ = layout;
  rank_ = rank;
  decided_ = std::make_shared<Decided>();
}

uint64_t AlgorithmSelector::PackDecision(OpKind kind, size_t bytes, AlgorithmId id) {
  static_assert(sizeof(OpKind) == 2);
  if (bytes >= uint64_t{1} << 40) return kNoDecision;
  return (uint64_t{bytes} << 24) | (uint64_t{static_cast<uint16_t>(kind)} << 8) |
         static_cast<uint8_t>(id);
}

std::optional<AlgorithmId> AlgorithmSelector::Forced(OpKind kind) const {
  std::optional<AlgorithmId> forced;
  // Most jobs force nothing per collective: skip the lookup, which every call would pay.
  if (!forced_.empty()) {
    if (auto it = forced_.find(kind); it != forced_.end()) forced = it->second;
  }
  if (!forced && forced_all_ && Implements(*forced_all_, kind)) forced = forced_all_;
  // Only a one-rank communicator gets here with one that cannot run (CheckForced).
  if (forced == AlgorithmId::kShmDirect && !layout_.arena) return std::nullopt;
  if (forced == AlgorithmId::kCmaDirect && !layout_.remote_read) return std::nullopt;
  return forced;
}

absl::Status AlgorithmSelector::CheckForced(const Peers& peers, absl::string_view transport) const {
  for (OpKind kind : kCollectiveKinds) {
    std::optional<AlgorithmId> forced = forced_all_;
    if (auto it = forced_.find(kind); it != forced_.end()) forced = it->second;
    if (!forced || !Implements(*forced, kind)) continue;
    if (std::string why = Unusable(*forced, peers, transport); !why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("WEFT_ALGO forces ", Name(*forced), " for ", Name(kind),
                       ", but it cannot run on this communicator: ", why));
    }
  }
  return absl::OkStatus();
}

AlgorithmId AlgorithmSelector::Choose(OpKind kind, size_t bytes) const {
  if (const std::optional<AlgorithmId> forced = Forced(kind)) return *forced;
  // The packed call with algorithm 0: the latest decision's key part if it was for this call.
  const uint64_t key = PackDecision(kind, bytes, AlgorithmId{});
  const uint64_t latest = decided_->latest.load(std::memory_order_relaxed);
  if (key != kNoDecision && (latest & ~uint64_t{0xff}) == key) {
    return static_cast<AlgorithmId>(latest & 0xff);
  }
  const AlgorithmId id = Decide(kind, bytes);
  decided_->latest.store(PackDecision(kind, bytes, id), std::memory_order_relaxed);
  return id;
}

AlgorithmId AlgorithmSelector::Decide(OpKind kind, size_t bytes) const {
  const std::pair<OpKind, size_t> call{kind, bytes};
  {
    std::lock_guard<std::mutex> lock(decided_->mu);
    if (auto it = decided_->by_call.find(call); it != decided_->by_call.end()) return it->second;
  }
  const AlgorithmId id = tuner_->Choose(kind, bytes, layout_).algorithm;
  bool first_of_class = false;
  {
    std::lock_guard<std::mutex> lock(decided_->mu);
    if (decided_->by_call.size() >= kRememberedDecisions) decided_->by_call.clear();
    decided_->by_call.emplace(call, id);
    const int size_class = bytes == 0 ? -1 : 63 - __builtin_clzll(bytes);
    first_of_class = decided_->printed.emplace(kind, size_class).second;
  }
  // Every rank decides alike: rank 0 speaks for them, once per collective and size class.
  if (rank_ == 0 && first_of_class && DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo, absl::StrCat("rank 0: tuner: ", Explain(kind, bytes)));
  }
  return id;
}

double AlgorithmSelector::Predict(AlgorithmId algorithm, OpKind kind, size_t bytes) const {
  return tuner_->Predict(algorithm, kind, bytes, layout_);
}

std::string AlgorithmSelector::Explain(OpKind kind, size_t bytes) const {
  std::string explained = tuner_->Explain(kind, bytes, layout_);
  if (const std::optional<AlgorithmId> forced = Forced(kind)) {
    return absl::StrCat("WEFT_ALGO forces ", Name(*forced), "; the tuner would say: ", explained);
  }
  return explained;
}

}  // namespace weft
