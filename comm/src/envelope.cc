// The communicator's reading of the Envelope fields that transports carry blindly.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/algorithm.h"
#include "op_kind.h"
#include "transport/link.h"

namespace weft {

const char* Name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kAllToAll:
      return "all_to_all";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kSend:
      return "send";
    case OpKind::kSplit:
      return "split";
    case OpKind::kAllGatherV:
      return "all_gather_v";
    case OpKind::kReduceScatterV:
      return "reduce_scatter_v";
    case OpKind::kAllToAllV:
      return "all_to_all_v";
  }
  return "unknown-op";
}

std::optional<OpKind> CollectiveNamed(absl::string_view name) {
  for (OpKind kind : kCollectiveKinds) {
    if (name == Name(kind)) return kind;
  }
  return std::nullopt;
}

std::string DescribeEnvelope(const Envelope& e) {
  const auto kind = static_cast<OpKind>(e.kind);
  if (kind == OpKind::kSend) {
    return absl::StrFormat("send message #%d tag=%d count=%d %s", e.seq, e.root_or_tag, e.count,
                           Name(static_cast<DataType>(e.dtype)));
  }
  std::string text = absl::StrFormat("%s #%d count=%d %s", Name(kind), e.seq, e.count,
                                     Name(static_cast<DataType>(e.dtype)));
  if (IsReduction(kind)) {
    absl::StrAppend(&text, " ", Name(static_cast<ReduceOp>(e.op)));
  }
  if (kind == OpKind::kBroadcast || kind == OpKind::kReduce) {
    absl::StrAppend(&text, " root=", e.root_or_tag);
  }
  absl::StrAppend(&text, " (", Name(static_cast<AlgorithmId>(e.algorithm)));
  if (e.step != 0) absl::StrAppend(&text, ", step ", e.step);
  return text + ")";
}

absl::Status EnvelopeMismatch(const Envelope& expected, size_t expected_bytes, const Envelope& got,
                              size_t got_bytes) {
  return absl::FailedPreconditionError(absl::StrCat(
      "mismatched operation: this rank expected ", DescribeEnvelope(expected), " (", expected_bytes,
      " bytes) but the peer sent ", DescribeEnvelope(got), " (", got_bytes, " bytes)"));
}

}  // namespace weft
