// AlgorithmSelector: which algorithm carries out a collective.
//
// WEFT_ALGO (or CommOptions::algorithm) forces a choice, either for every collective that
// implements it ("ring") or per collective ("all_reduce=rabenseifner,broadcast=tree"). Otherwise
// the choice follows the rank layout and size: the shared-memory direct algorithms whenever every
// rank shares this host, else Rabenseifner for small all-reduces and the ring for large ones,
// binomial trees for rooted collectives. A forced algorithm that cannot run here (shm_direct across
// hosts) falls back to the default choice, and WEFT_DEBUG=INFO says so.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "algorithms/algorithm.h"

namespace weft {

class AlgorithmSelector {
 public:
  // Fails on an unknown algorithm or collective name, listing the valid ones.
  static absl::StatusOr<AlgorithmSelector> Create(absl::string_view spec);

  AlgorithmId Choose(OpKind kind, size_t bytes, const Peers& peers) const;

 private:
  AlgorithmId Default(OpKind kind, size_t bytes, const Peers& peers) const;

  std::optional<AlgorithmId> forced_all_;
  std::map<OpKind, AlgorithmId> forced_;
};

}  // namespace weft
