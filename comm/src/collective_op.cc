#include "collective_op.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backoff.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

std::vector<Transfer> Post(Peers& peers, const std::vector<P2pTransfer>& transfers) {
  std::vector<Transfer> posted;
  posted.reserve(transfers.size());
  for (const P2pTransfer& t : transfers) {
    posted.push_back(t.is_send ? peers.SendAs(t.peer, t.envelope, t.data, t.bytes)
                               : peers.RecvAs(t.peer, t.envelope, RecvSink::Copy(t.data), t.bytes));
  }
  return posted;
}

}  // namespace

CollectiveOp::CollectiveOp(Peers& peers, const CollectiveArgs& args, AlgorithmId algorithm,
                           uint64_t seq)
    : peers_(peers),
      args_(args),
      algorithm_(algorithm),
      envelope_(MakeEnvelope(args, algorithm, seq)) {}

std::optional<absl::Status> CollectiveOp::TryEagerly(const Deadline& deadline,
                                                     absl::Duration window) {
  peers_.Begin(envelope_, deadline);
  Algorithm& algorithm = Made();
  if (!posted_) {
    if (!algorithm.Post()) return std::nullopt;
    posted_ = true;
  }
  // The clock is read every few dozen polls only, and first after them: peers in step answer
  // within a few polls, and a clock read costs as much as several.
  constexpr int kPollsPerClockRead = 64;
  std::optional<std::chrono::steady_clock::time_point> give_up;
  for (int polls = 1; !algorithm.PeersPosted(); ++polls) {
    if (polls % kPollsPerClockRead == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (!give_up) give_up = now + absl::ToChronoNanoseconds(window);
      if (now >= *give_up) return std::nullopt;
    }
    CpuRelax();
  }
  return RunBegun();
}

absl::Status CollectiveOp::Run(const Deadline& deadline) {
  peers_.Begin(envelope_, deadline);
  return RunBegun();
}

Algorithm& CollectiveOp::Made() {
  if (made_ == nullptr) made_ = MakeAlgorithm(algorithm_, peers_, args_);
  return *made_;
}

absl::Status CollectiveOp::RunBegun() {
  if (absl::Status s = Made().Run(); !s.ok()) return s;
  if (args_.op == ReduceOp::kAvg) FinishAverage();
  return absl::OkStatus();
}

void CollectiveOp::FinishAverage() {
  switch (args_.kind) {
    case OpKind::kAllReduce:
    case OpKind::kReduceScatter:
      DivideBy(args_.dtype, args_.recv, args_.count, peers_.size());
      break;
    case OpKind::kReduce:
      if (peers_.rank() == args_.root)
        DivideBy(args_.dtype, args_.recv, args_.count, peers_.size());
      break;
    case OpKind::kReduceScatterV:
      DivideBy(args_.dtype, args_.recv, args_.blocks->recv_counts[peers_.rank()], peers_.size());
      break;
    default:
      break;
  }
}

std::string CollectiveOp::Describe() const {
  std::string text = absl::StrFormat("%s #%d (%s, %d x %s", Name(args_.kind), envelope_.seq,
                                     Name(algorithm_), args_.count, Name(args_.dtype));
  if (IsReduction(args_.kind)) absl::StrAppend(&text, " ", Name(args_.op));
  if (args_.kind == OpKind::kBroadcast || args_.kind == OpKind::kReduce) {
    absl::StrAppend(&text, ", root ", args_.root);
  }
  return text + ")";
}

OpSummary CollectiveOp::Summarize() const {
  OpSummary s;
  s.name = Name(args_.kind);
  s.dtype = Name(args_.dtype);
  s.algorithm = Name(algorithm_);
  s.seq = envelope_.seq;
  s.count = args_.count;
  s.collective = true;
  s.bytes = args_.count * SizeOf(args_.dtype);
  switch (args_.kind) {
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
    case OpKind::kAllToAll:
      s.bytes *= peers_.size();  // the large buffer, as the benchmarks count it
      break;
    default:
      break;
  }
  if (IsReduction(args_.kind)) s.reduce_op = Name(args_.op);
  if (args_.kind == OpKind::kBroadcast || args_.kind == OpKind::kReduce) s.root = args_.root;
  if (args_.kind == OpKind::kBarrier) s.dtype = "";
  return s;
}

namespace {

OpSummary SummarizeTransfers(const std::vector<P2pTransfer>& transfers) {
  OpSummary s;
  if (transfers.size() == 1) {
    const P2pTransfer& t = transfers.front();
    s.name = t.is_send ? "send" : "recv";
    s.dtype = Name(static_cast<DataType>(t.envelope.dtype));
    s.seq = t.envelope.seq;
    s.count = t.envelope.count;
    s.bytes = t.bytes;
    s.peer = t.peer;
    return s;
  }
  s.name = "group";
  s.count = transfers.size();
  for (const P2pTransfer& t : transfers) s.bytes += t.bytes;
  return s;
}

}  // namespace

absl::Status P2pOp::Run(const Deadline& deadline) {
  peers_.Begin(Envelope{}, deadline);
  return peers_.Wait(Post(peers_, transfers_));
}

std::string P2pOp::Describe() const {
  if (transfers_.size() != 1) return absl::StrCat("group of ", transfers_.size(), " transfers");
  const P2pTransfer& t = transfers_.front();
  return absl::StrFormat("%s #%d %s rank %d (tag %d, %d bytes)", t.is_send ? "send" : "recv",
                         t.envelope.seq, t.is_send ? "to" : "from", t.peer, t.envelope.root_or_tag,
                         t.bytes);
}

absl::Status GroupOp::Run(const Deadline& deadline) {
  peers_.Begin(Envelope{}, deadline);
  std::vector<Transfer> posted = Post(peers_, transfers_);
  for (std::unique_ptr<Op>& op : collectives_) {
    if (absl::Status s = op->Run(deadline); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(op->Describe(), ": ", s.message()));
    }
  }
  peers_.Begin(Envelope{}, deadline);
  return peers_.Wait(posted);
}

OpSummary P2pOp::Summarize() const { return SummarizeTransfers(transfers_); }

OpSummary GroupOp::Summarize() const {
  OpSummary s = SummarizeTransfers(transfers_);
  s.name = "group";
  s.count = transfers_.size() + collectives_.size();
  return s;
}

std::string GroupOp::Describe() const {
  return absl::StrCat("group of ", transfers_.size(), " transfers and ", collectives_.size(),
                      " collectives");
}

}  // namespace weft
