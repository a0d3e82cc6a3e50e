// The kinds of operation a communicator runs; they travel in envelopes (append only).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace weft {

enum class OpKind : uint16_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kBarrier = 7,
  kSend = 8,  // point-to-point; the receiver expects kSend too
  kSplit = 9,
  // Variable counts (MPI's *v collectives): per-rank blocks of any size, including zero.
  kAllGatherV = 10,
  kReduceScatterV = 11,
  kAllToAllV = 12,
};

// The collectives, as WEFT_ALGO and the tuner's tools name them.
inline constexpr OpKind kCollectiveKinds[] = {
    OpKind::kAllReduce,      OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast,
    OpKind::kReduce,         OpKind::kAllToAll,      OpKind::kBarrier,   OpKind::kAllGatherV,
    OpKind::kReduceScatterV, OpKind::kAllToAllV};

// Whether the collective reduces: its operator is part of what the ranks must agree on.
inline bool IsReduction(OpKind kind) {
  return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter || kind == OpKind::kReduce ||
         kind == OpKind::kReduceScatterV;
}

// "all_reduce", "reduce_scatter", ... ("send" for point-to-point messages).
const char* Name(OpKind kind);
// The collective of kCollectiveKinds called `name`, if any.
std::optional<OpKind> CollectiveNamed(absl::string_view name);

}  // namespace weft
