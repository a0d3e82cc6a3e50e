// The public Communicator's calls: argument checking, sequence numbering and the algorithm's
// pick at issue; the work itself happens in CommState, the engine and the algorithms. Creation
// lives in communicator_create.cc.
#include "weft/comm/communicator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collective_op.h"
#include "comm_state.h"
#include "log.h"

namespace weft {

using internal::CommState;

Communicator::Communicator(std::shared_ptr<internal::CommState> state) : state_(std::move(state)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return state_->rank(); }
int Communicator::size() const { return state_->size(); }
std::vector<int> Communicator::NodeRanks() const { return state_->peers().nodes().local_group(); }

namespace {

// The most bytes a buffer may span.
constexpr size_t kMaxBytes = static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max());

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool Overlap(const void* a, size_t a_bytes, uintptr_t b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  return a_bytes > 0 && b_bytes > 0 && x < b + b_bytes && b < x + a_bytes;
}

// Displacements of `counts` back to back, and their sum in `total` (SIZE_MAX past it: the
// buffer check then rejects it).
std::vector<size_t> PackedDisplacements(const std::vector<size_t>& counts, size_t* total) {
  std::vector<size_t> displs;
  displs.reserve(counts.size());
  *total = 0;
  for (size_t count : counts) {
    displs.push_back(*total);
    if (__builtin_add_overflow(*total, count, total)) *total = SIZE_MAX;
  }
  return displs;
}

size_t Sum(const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t count : counts) total += count;
  return total;
}

// Argument checks shared by every call. Errors name the call and this rank.
class Check {
 public:
  Check(const CommState& state, const char* call) : state_(state), call_(call) {}

  Check& Type(DataType type) {
    if (status_.ok() && !IsValid(type)) {
      Fail(absl::StrCat("invalid data type ", static_cast<int>(type)));
    }
    return *this;
  }
  Check& Operator(ReduceOp op) {
    if (status_.ok() && !IsValid(op))
      Fail(absl::StrCat("invalid reduce op ", static_cast<int>(op)));
    return *this;
  }
  // count elements of `type`, `blocks` times; also rejects null buffers for non-empty calls.
  Check& Buffer(const void* buffer, const char* name, size_t count, DataType type,
                size_t blocks = 1) {
    if (!status_.ok() || !IsValid(type)) return *this;
    const size_t es = SizeOf(type);
    size_t bytes = 0;
    if (__builtin_mul_overflow(count, es * blocks, &bytes) || bytes > kMaxBytes) {
      Fail(absl::StrCat(name, ": count ", count, (blocks > 1 ? absl::StrCat(" x ", blocks) : ""),
                        " elements of ", Name(type), " overflows the address space"));
    } else if (buffer == nullptr && count > 0) {
      Fail(absl::StrCat(name, " buffer is null (count ", count, ")"));
    }
    return *this;
  }
  Check& Rank(int rank, const char* what) {
    if (status_.ok() && (rank < 0 || rank >= state_.size())) {
      Fail(absl::StrCat(what, " ", rank, " is not a rank of this communicator (size ",
                        state_.size(), ")"));
    }
    return *this;
  }
  Check& NotSelf(int peer) {
    if (status_.ok() && peer == state_.rank()) Fail("peer is this rank itself");
    return *this;
  }
  // A vector of the *_v collectives: one entry per rank.
  Check& PerRank(const std::vector<size_t>& entries, const char* name) {
    if (status_.ok() && entries.size() != static_cast<size_t>(state_.size())) {
      Fail(absl::StrCat(name, " has ", entries.size(), entries.size() == 1 ? " entry" : " entries",
                        ", not one per rank (", state_.size(), ")"));
    }
    return *this;
  }
  // The block a rank sends itself is counted on both sides: they must agree.
  Check& OwnBlock(size_t count, absl::string_view name, const std::vector<size_t>& counts,
                  const char* counts_name) {
    if (!status_.ok()) return *this;
    if (const size_t own = counts[state_.rank()]; count != own) {
      Fail(absl::StrCat(name, " is ", count, " but ", counts_name, "[", state_.rank(), "] is ", own,
                        ": both count this rank's own block"));
    }
    return *this;
  }
  // Block r of `buffer` is counts[r] elements of `type` at element displs[r] (one entry per rank
  // each). Every non-empty block lies within the address space and needs a buffer, and blocks
  // that are received into (`written`) share no element.
  Check& Blocks(const void* buffer, const char* name, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DataType type, bool written) {
    if (!status_.ok() || !IsValid(type)) return *this;
    std::vector<size_t> filled;  // the non-empty blocks
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] == 0) continue;  // its displacement means nothing (as in MPI)
      size_t end = 0, bytes = 0;
      if (__builtin_add_overflow(displs[r], counts[r], &end) ||
          __builtin_mul_overflow(end, SizeOf(type), &bytes) || bytes > kMaxBytes) {
        Fail(absl::StrCat(name, " block ", r, " (", counts[r], " elements of ", Name(type),
                          " at displacement ", displs[r], ") overflows the address space"));
        return *this;
      }
      filled.push_back(r);
    }
    if (buffer == nullptr && !filled.empty()) {
      Fail(absl::StrCat(name, " buffer is null (block ", filled[0], " has ", counts[filled[0]],
                        " elements)"));
      return *this;
    }
    if (!written) return *this;
    std::sort(filled.begin(), filled.end(),
              [&](size_t a, size_t b) { return displs[a] < displs[b]; });
    for (size_t i = 1; i < filled.size(); ++i) {
      const size_t a = filled[i - 1], b = filled[i];
      if (displs[a] + counts[a] > displs[b]) {
        Fail(absl::StrCat(name, " blocks ", a, " and ", b, " overlap (elements ", displs[a], "..",
                          displs[a] + counts[a] - 1, " and ", displs[b], "..",
                          displs[b] + counts[b] - 1, ")"));
        return *this;
      }
    }
    return *this;
  }
  // `buffer` (`count` elements) shares no byte with the blocks of `other` unless it is this
  // rank's block exactly (in place); `counts` and `displs` as for Blocks, already checked.
  Check& InPlaceOnly(const void* buffer, const char* name, size_t count, const void* other,
                     const char* other_name, const std::vector<size_t>& counts,
                     const std::vector<size_t>& displs, DataType type) {
    if (!status_.ok() || !IsValid(type)) return *this;
    const size_t es = SizeOf(type);
    const int me = state_.rank();
    const auto base = reinterpret_cast<uintptr_t>(other);
    if (reinterpret_cast<uintptr_t>(buffer) == base + displs[me] * es) return *this;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (Overlap(buffer, count * es, base + displs[r] * es, counts[r] * es)) {
        Fail(absl::StrCat(name, " overlaps ", other_name, " block ", r, "; in place it must be ",
                          other_name, " block ", me, " exactly"));
        break;
      }
    }
    return *this;
  }

  const absl::Status& status() const { return status_; }

 private:
  void Fail(absl::string_view message) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("rank ", state_.rank(), ": ", call_, ": ", message));
  }

  const CommState& state_;
  const char* call_;
  absl::Status status_;
};

// Issues a collective: numbers it, picks the algorithm and queues it (or parks it in the group).
Work Issue(CommState& state, const CollectiveArgs& args, size_t bytes) {
  std::lock_guard<std::mutex> lock(state.mu);
  const uint64_t seq = state.next_collective++;
  const AlgorithmId algorithm = state.selector().Choose(args.kind, bytes);
  if (DebugEnabled(DebugLevel::kTrace)) {
    DebugLog(DebugLevel::kTrace, absl::StrFormat("rank %d: %s #%d, %d bytes -> %s", state.rank(),
                                                 Name(args.kind), seq, bytes, Name(algorithm)));
  }
  CollectiveOp op(state.peers(), args, algorithm, seq);
  const auto to_heap = [&] { return std::make_unique<CollectiveOp>(std::move(op)); };
  if (state.group_depth > 0) {
    state.group_ops.push_back(to_heap());
    return Work(state.group_state);
  }
  return state.engine().Submit(op, to_heap);
}

}  // namespace

Work Communicator::AllReduce(const void* send, void* recv, size_t count, DataType type,
                             ReduceOp op) {
  Check check(*state_, "all_reduce");
  check.Type(type).Operator(op).Buffer(send, "send", count, type).Buffer(recv, "recv", count, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_, {OpKind::kAllReduce, send, recv, count, type, op, -1, nullptr},
               count * SizeOf(type));
}

Work Communicator::ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type,
                                 ReduceOp op) {
  Check check(*state_, "reduce_scatter");
  check.Type(type)
      .Operator(op)
      .Buffer(send, "send", recv_count, type, size())
      .Buffer(recv, "recv", recv_count, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (recv_count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_, {OpKind::kReduceScatter, send, recv, recv_count, type, op, -1, nullptr},
               recv_count * SizeOf(type) * size());
}

Work Communicator::AllGather(const void* send, void* recv, size_t send_count, DataType type) {
  Check check(*state_, "all_gather");
  check.Type(type)
      .Buffer(send, "send", send_count, type)
      .Buffer(recv, "recv", send_count, type, size());
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (send_count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_,
               {OpKind::kAllGather, send, recv, send_count, type, ReduceOp::kSum, -1, nullptr},
               send_count * SizeOf(type) * size());
}

Work Communicator::Broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  Check check(*state_, "broadcast");
  check.Type(type).Rank(root, "root").Buffer(recv, "recv", count, type);
  if (rank() == root) check.Buffer(send, "send", count, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_,
               {OpKind::kBroadcast, send, recv, count, type, ReduceOp::kSum, root, nullptr},
               count * SizeOf(type));
}

Work Communicator::Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          int root) {
  Check check(*state_, "reduce");
  check.Type(type).Operator(op).Rank(root, "root").Buffer(send, "send", count, type);
  if (rank() == root) check.Buffer(recv, "recv", count, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_, {OpKind::kReduce, send, recv, count, type, op, root, nullptr},
               count * SizeOf(type));
}

Work Communicator::AllToAll(const void* send, void* recv, size_t count, DataType type) {
  Check check(*state_, "all_to_all");
  check.Type(type)
      .Buffer(send, "send", count, type, size())
      .Buffer(recv, "recv", count, type, size());
  if (!check.status().ok()) return Engine::Finished(check.status());
  if (count == 0) return Engine::Finished(absl::OkStatus());
  return Issue(*state_, {OpKind::kAllToAll, send, recv, count, type, ReduceOp::kSum, -1, nullptr},
               count * SizeOf(type) * size());
}

Work Communicator::AllGatherV(const void* send, size_t send_count, void* recv,
                              const std::vector<size_t>& recv_counts,
                              const std::vector<size_t>& recv_displs, DataType type) {
  Check check(*state_, "all_gather_v");
  check.Type(type).PerRank(recv_counts, "recv_counts").PerRank(recv_displs, "recv_displs");
  if (!check.status().ok()) return Engine::Finished(check.status());
  check.OwnBlock(send_count, "send_count", recv_counts, "recv_counts")
      .Buffer(send, "send", send_count, type)
      .Blocks(recv, "recv", recv_counts, recv_displs, type, /*written=*/true)
      .InPlaceOnly(send, "send", send_count, recv, "recv", recv_counts, recv_displs, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  auto blocks = std::make_shared<BlockLayout>();
  blocks->recv_counts = recv_counts;
  blocks->recv_displs = recv_displs;
  // Issued even when every block is empty: all ranks then still number it alike.
  const size_t total = Sum(recv_counts);
  return Issue(
      *state_,
      {OpKind::kAllGatherV, send, recv, total, type, ReduceOp::kSum, -1, std::move(blocks)},
      total * SizeOf(type));
}

Work Communicator::ReduceScatterV(const void* send, void* recv,
                                  const std::vector<size_t>& recv_counts, DataType type,
                                  ReduceOp op) {
  Check check(*state_, "reduce_scatter_v");
  check.Type(type).Operator(op).PerRank(recv_counts, "recv_counts");
  if (!check.status().ok()) return Engine::Finished(check.status());
  size_t total = 0;
  std::vector<size_t> send_displs = PackedDisplacements(recv_counts, &total);
  const size_t own = recv_counts[rank()];
  check.Buffer(send, "send", total, type)
      .Buffer(recv, "recv", own, type)
      .InPlaceOnly(recv, "recv", own, send, "send", recv_counts, send_displs, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  auto blocks = std::make_shared<BlockLayout>();
  blocks->send_counts = recv_counts;
  blocks->send_displs = std::move(send_displs);
  blocks->recv_counts = recv_counts;
  return Issue(*state_,
               {OpKind::kReduceScatterV, send, recv, total, type, op, -1, std::move(blocks)},
               total * SizeOf(type));
}

Work Communicator::AllToAllV(const void* send, const std::vector<size_t>& send_counts,
                             const std::vector<size_t>& send_displs, void* recv,
                             const std::vector<size_t>& recv_counts,
                             const std::vector<size_t>& recv_displs, DataType type) {
  Check check(*state_, "all_to_all_v");
  check.Type(type)
      .PerRank(send_counts, "send_counts")
      .PerRank(send_displs, "send_displs")
      .PerRank(recv_counts, "recv_counts")
      .PerRank(recv_displs, "recv_displs");
  if (!check.status().ok()) return Engine::Finished(check.status());
  // Send blocks may overlap (they are only read), and send may overlap recv: the algorithm then
  // sends from a copy.
  check
      .OwnBlock(send_counts[rank()], absl::StrCat("send_counts[", rank(), "]"), recv_counts,
                "recv_counts")
      .Blocks(send, "send", send_counts, send_displs, type, /*written=*/false)
      .Blocks(recv, "recv", recv_counts, recv_displs, type, /*written=*/true);
  if (!check.status().ok()) return Engine::Finished(check.status());
  auto blocks = std::make_shared<BlockLayout>(
      BlockLayout{send_counts, send_displs, recv_counts, recv_displs});
  // Always issued: whether a rank has anything to exchange is its own business, the
  // operation's number everyone's.
  const size_t total = Sum(send_counts);
  return Issue(*state_,
               {OpKind::kAllToAllV, send, recv, total, type, ReduceOp::kSum, -1, std::move(blocks)},
               total * SizeOf(type));
}

Work Communicator::Barrier() {
  return Issue(
      *state_,
      {OpKind::kBarrier, nullptr, nullptr, 0, DataType::kUint8, ReduceOp::kSum, -1, nullptr}, 0);
}

namespace {

Work IssueTransfer(CommState& state, bool is_send, void* data, size_t count, DataType type,
                   int peer, int tag) {
  Check check(state, is_send ? "send" : "recv");
  check.Type(type).Rank(peer, "peer").NotSelf(peer).Buffer(data, "data", count, type);
  if (!check.status().ok()) return Engine::Finished(check.status());
  std::lock_guard<std::mutex> lock(state.mu);
  P2pTransfer transfer;
  transfer.is_send = is_send;
  transfer.peer = peer;
  transfer.data = data;
  transfer.bytes = count * SizeOf(type);
  transfer.envelope.seq = is_send ? state.sent_to[peer]++ : state.received_from[peer]++;
  transfer.envelope.kind = static_cast<uint16_t>(OpKind::kSend);
  transfer.envelope.count = count;
  transfer.envelope.dtype = static_cast<uint8_t>(type);
  transfer.envelope.root_or_tag = tag;
  if (state.group_depth > 0) {
    // Transfers of a group run together in one GroupOp, ahead of its collectives.
    state.group_ops.push_back(
        std::make_unique<P2pOp>(state.peers(), std::vector<P2pTransfer>{transfer}));
    return Work(state.group_state);
  }
  return state.engine().Submit(
      std::make_unique<P2pOp>(state.peers(), std::vector<P2pTransfer>{transfer}));
}

}  // namespace

Work Communicator::Send(const void* data, size_t count, DataType type, int peer, int tag) {
  return IssueTransfer(*state_, true, const_cast<void*>(data), count, type, peer, tag);
}

Work Communicator::Recv(void* data, size_t count, DataType type, int peer, int tag) {
  return IssueTransfer(*state_, false, data, count, type, peer, tag);
}

void Communicator::GroupStart() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->group_depth++ == 0) state_->group_state = Engine::NewState();
}

Work Communicator::GroupEnd() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->group_depth == 0) {
    return Engine::Finished(absl::FailedPreconditionError(
        absl::StrCat("rank ", rank(), ": GroupEnd without GroupStart")));
  }
  if (--state_->group_depth > 0) return Work(state_->group_state);
  std::vector<P2pTransfer> transfers;
  std::vector<std::unique_ptr<Op>> collectives;
  for (std::unique_ptr<Op>& op : state_->group_ops) {
    if (auto* p2p = dynamic_cast<P2pOp*>(op.get())) {
      std::vector<P2pTransfer> parts = p2p->TakeTransfers();
      transfers.insert(transfers.end(), parts.begin(), parts.end());
    } else {
      collectives.push_back(std::move(op));
    }
  }
  state_->group_ops.clear();
  return state_->engine().Submit(
      std::make_unique<GroupOp>(state_->peers(), std::move(transfers), std::move(collectives)),
      std::move(state_->group_state));
}

void Communicator::Abort() { state_->engine().Abort(); }

absl::StatusOr<std::string> Communicator::DumpFlightRecorder(const std::string& reason) const {
  return state_->engine().DumpRecorder(reason);
}

std::string Communicator::AlgorithmFor(const std::string& collective, size_t bytes) const {
  const std::optional<OpKind> kind = CollectiveNamed(collective);
  if (!kind) return "unknown collective";
  return Name(state_->selector().Choose(*kind, bytes));
}

double Communicator::PredictedSeconds(const std::string& collective, size_t bytes) const {
  const std::optional<OpKind> kind = CollectiveNamed(collective);
  if (!kind) return -1;
  const AlgorithmSelector& selector = state_->selector();
  return selector.Predict(selector.Choose(*kind, bytes), *kind, bytes);
}

double Communicator::PredictedSeconds(const std::string& collective, size_t bytes,
                                      const std::string& algorithm) const {
  const std::optional<OpKind> kind = CollectiveNamed(collective);
  const std::optional<AlgorithmId> id = ParseAlgorithm(algorithm);
  if (!kind || !id) return -1;
  return state_->selector().Predict(*id, *kind, bytes);
}

std::string Communicator::ExplainAlgorithm(const std::string& collective, size_t bytes) const {
  const std::optional<OpKind> kind = CollectiveNamed(collective);
  if (!kind) return "unknown collective";
  return state_->selector().Explain(*kind, bytes);
}

}  // namespace weft
