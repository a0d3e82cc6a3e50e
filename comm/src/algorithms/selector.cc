#include "algorithms/selector.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "log.h"

namespace weft {
namespace {

// Below this, Rabenseifner's log2(p) steps beat the ring's p-1 steps on the network.
constexpr size_t kRingMinBytes = 256 << 10;

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
      "' in WEFT_ALGO; known: ring, rabenseifner, shm_direct, tree, pairwise, dissemination"));
}

}  // namespace

absl::StatusOr<AlgorithmSelector> AlgorithmSelector::Create(absl::string_view spec) {
  AlgorithmSelector selector;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
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

AlgorithmId AlgorithmSelector::Choose(OpKind kind, size_t bytes, const Peers& peers) const {
  std::optional<AlgorithmId> forced;
  if (auto it = forced_.find(kind); it != forced_.end()) {
    forced = it->second;
  } else if (forced_all_ && Implements(*forced_all_, kind)) {
    forced = forced_all_;
  }
  if (forced && Usable(*forced, peers)) return *forced;
  const AlgorithmId chosen = Default(kind, bytes, peers);
  if (forced && DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo,
             absl::StrCat("rank ", peers.rank(), ": WEFT_ALGO asks for ", Name(*forced), " for ",
                          Name(kind), " but it cannot run here (ranks span hosts); using ",
                          Name(chosen)));
  }
  return chosen;
}

AlgorithmId AlgorithmSelector::Default(OpKind kind, size_t bytes, const Peers& peers) const {
  const bool one_host = peers.arena() != nullptr;
  switch (kind) {
    case OpKind::kAllReduce:
      if (one_host) return AlgorithmId::kShmDirect;
      return bytes < kRingMinBytes ? AlgorithmId::kRabenseifner : AlgorithmId::kRing;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
      return one_host ? AlgorithmId::kShmDirect : AlgorithmId::kRing;
    case OpKind::kBroadcast:
    case OpKind::kReduce:
      return one_host ? AlgorithmId::kShmDirect : AlgorithmId::kTree;
    case OpKind::kBarrier:
      return one_host ? AlgorithmId::kShmDirect : AlgorithmId::kDissemination;
    default:
      return AlgorithmId::kPairwise;
  }
}

}  // namespace weft
