#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/shm/streaming_copy.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

constexpr size_t kHalfBytes = ArenaRounds::kHalfBytes;
// All-reduces up to this many bytes per rank take the single-phase path.
constexpr size_t kOneShotBytes = 16 << 10;
// An all-gather's input of this many bytes or more is taken to come from DRAM, not from the
// caches its writer left it in, and is read four pages at a time: well past the L2, that hides
// DRAM's latency, which an input still in the caches does not have.
constexpr size_t kInputInDramBytes = 8 << 20;
constexpr int kReduced = ArenaRounds::kReduced;
// A broadcast round's data is published in pieces of this many bytes.
constexpr size_t kPieceBytes = 64 << 10;
}  // namespace

ShmDirect::ShmDirect(Peers& peers, const CollectiveArgs& args)
    : peers_(peers),
      rounds_(peers),
      arena_(rounds_.arena()),
      args_(args),
      sources_(arena_.local_size()) {}

bool ShmDirect::FitsInLine(const CollectiveArgs& args) {
  switch (args.kind) {
    case OpKind::kBarrier:
      return true;
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kReduce:
    case OpKind::kAllGather:  // count is per rank
      return args.count > 0 && args.count * args.element_bytes() <= ArenaRounds::kLineRoundBytes;
    default:
      return false;
  }
}

bool ShmDirect::Post() {
  if (!FitsInLine(args_) || !rounds_.CanBeginNow()) return false;
  absl::StatusOr<ArenaRounds::Round> round = rounds_.Begin();  // at once: CanBeginNow
  if (!round.ok()) return false;
  PostLine(round->number);
  return true;
}

bool ShmDirect::PeersPosted() const { return rounds_.LinesPosted(line_round_); }

absl::Status ShmDirect::Run() {
  if (line_round_ != 0) return FinishLine();
  switch (args_.kind) {
    case OpKind::kAllReduce:
      return AllReduce();
    case OpKind::kReduceScatter:
      return ReduceScatter();
    case OpKind::kAllGather:
      return AllGather();
    case OpKind::kBroadcast:
      return Broadcast();
    case OpKind::kReduce:
      return Reduce();
    case OpKind::kBarrier:
      return Barrier();
    default:
      return absl::InternalError("shm_direct does not implement this collective");
  }
}

absl::Status ShmDirect::CopyIn(const Round& round, const std::byte* chunk, size_t bytes) {
  std::memcpy(round.mine, chunk, bytes);
  rounds_.PublishCopiedIn(round.number);
  if (absl::Status s = rounds_.WaitAllBegun(round.number); !s.ok()) return s;
  return rounds_.CheckAllFingerprints(round.number);
}

void ShmDirect::ReduceSlice(const Round& round, const Partition& slices) {
  const size_t at = slices.offset(arena_.local_rank()) * args_.element_bytes();
  for (int j = 0; j < arena_.local_size(); ++j) sources_[j] = rounds_.Data(j, round) + at;
  ReduceMany(args_.dtype, args_.op, round.mine + at, sources_.data(), arena_.local_size(),
             slices.size(arena_.local_rank()));
  arena_.Publish(kReduced, round.number);
}

absl::Status ShmDirect::GatherSlices(const Round& round, const Partition& slices, std::byte* out) {
  const size_t es = args_.element_bytes();
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j != arena_.local_rank()) {
      if (absl::Status s = rounds_.WaitFor(j, kReduced, round.number); !s.ok()) return s;
    }
    const size_t at = slices.offset(j) * es;
    std::memcpy(out + at, rounds_.Data(j, round) + at, slices.size(j) * es);
  }
  return absl::OkStatus();
}

template <typename Body>
absl::Status ShmDirect::ForEachRound(size_t count, size_t chunk, int slots, Body body) {
  for (size_t offset = 0; offset < count; offset += chunk) {
    const size_t n = std::min(chunk, count - offset);
    absl::StatusOr<Round> round = rounds_.Begin(slots * SlotBytes(n));
    if (!round.ok()) return round.status();
    if (absl::Status s = body(offset, n, *round); !s.ok()) return s;
    rounds_.Finish(round->number);
  }
  return absl::OkStatus();
}

absl::Status ShmDirect::AllReduce() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes();
  if (FitsInLine(args_)) return LineRound();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  // A large output that nothing has touched this round is written around the cache: ordinary
  // stores would read every line from memory first, only to overwrite it.
  const bool stream = send != recv && StreamsOutput(2 * p * args_.count * es);
  const absl::Status status = ForEachRound(
      args_.count, kHalfBytes / es, 1, [&](size_t offset, size_t n, const Round& round) {
        const std::byte* in = send + offset * es;
        std::byte* out = recv + offset * es;
        std::byte* mine = round.mine;
        if (n * es <= kOneShotBytes) {
          if (absl::Status s = CopyIn(round, in, n * es); !s.ok()) return s;
          for (int j = 0; j < p; ++j) sources_[j] = rounds_.Data(j, round);
          ReduceMany(args_.dtype, args_.op, out, sources_.data(), p, n);
          return absl::OkStatus();
        }
        // Slice j of my half carries my contribution to slice j, which rank j reduces; my own
        // slice is reduced straight from my input, so only (p-1)/p of the chunk is copied in.
        const Partition slices(n, p);
        for (int j = 0; j < p; ++j) {
          if (j == me) continue;
          std::memcpy(mine + slices.offset(j) * es, in + slices.offset(j) * es,
                      slices.size(j) * es);
        }
        rounds_.PublishCopiedIn(round.number);
        if (absl::Status s = rounds_.WaitAllBegun(round.number); !s.ok()) return s;
        if (absl::Status s = rounds_.CheckAllFingerprints(round.number); !s.ok()) return s;
        const size_t at = slices.offset(me) * es, bytes = slices.size(me) * es;
        for (int j = 0; j < p; ++j) sources_[j] = j == me ? in + at : rounds_.Data(j, round) + at;
        if (stream) {
          ReduceMany(args_.dtype, args_.op, mine + at, sources_.data(), p, slices.size(me));
          StreamingCopy(out + at, mine + at, bytes);
        } else {
          // In place, `out + at` is `in + at`: the input slice is read before it is overwritten.
          ReduceMany(args_.dtype, args_.op, out + at, sources_.data(), p, slices.size(me));
          std::memcpy(mine + at, out + at, bytes);
        }
        arena_.Publish(kReduced, round.number);
        for (int j = 0; j < p; ++j) {
          if (j == me) continue;
          if (absl::Status s = rounds_.WaitFor(j, kReduced, round.number); !s.ok()) return s;
          CopyOut(stream, out + slices.offset(j) * es,
                  rounds_.Data(j, round) + slices.offset(j) * es, slices.size(j) * es);
        }
        return absl::OkStatus();
      });
  if (stream) StreamingCopyDone();
  return status;
}

absl::Status ShmDirect::ReduceScatter() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const size_t block = args_.count;  // elements per rank
  // A whole chunk fills a slot of whole lines (element sizes divide 64).
  const size_t chunk = std::max<size_t>(1, kHalfBytes / p / 64 * 64 / es);
  return ForEachRound(block, chunk, p, [&](size_t offset, size_t n, const Round& round) {
    // Slot j of my data holds my contribution to rank j's block; mine is read from my input.
    // Slots are whole lines, unless more ranks share the host than a half has lines.
    const size_t slot = std::min(SlotBytes(n), kHalfBytes / p / es * es);
    for (int j = 0; j < p; ++j) {
      if (j == me) continue;
      std::memcpy(round.mine + j * slot, send + (j * block + offset) * es, n * es);
    }
    rounds_.PublishCopiedIn(round.number);
    if (absl::Status s = rounds_.WaitAllBegun(round.number); !s.ok()) return s;
    if (absl::Status s = rounds_.CheckAllFingerprints(round.number); !s.ok()) return s;
    for (int j = 0; j < p; ++j) {
      sources_[j] =
          j == me ? send + (me * block + offset) * es : rounds_.Data(j, round) + me * slot;
    }
    ReduceMany(args_.dtype, args_.op, recv + offset * es, sources_.data(), p, n);
    return absl::OkStatus();
  });
}

absl::Status ShmDirect::AllGather() {
  if (FitsInLine(args_)) return LineRound();
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const size_t block = args_.count;
  const bool in_place = send == recv + me * block * es;
  const bool stream = !in_place && StreamsOutput((p + 1) * p * block * es);
  const bool input_in_dram = block * es >= kInputInDramBytes;
  const absl::Status status =
      ForEachRound(block, kHalfBytes / es, 1, [&](size_t offset, size_t n, const Round& round) {
        std::byte* mine = round.mine;
        const std::byte* in = send + offset * es;
        std::byte* own = recv + (me * block + offset) * es;
        if (stream) {
          // One read of my input feeds my half and my own block: two passes over it cost more
          // than the peers gain from seeing my half before my own block is written.
          StreamingCopyKeeping(own, mine, in, n * es, input_in_dram);
          rounds_.PublishCopiedIn(round.number);
        } else {
          // My own block first, and my half from it while it is in cache: copying my own block
          // out of my half while the peers read that half makes both wait on the same lines.
          if (!in_place) {
            std::memcpy(own, in, n * es);
            in = own;
          }
          std::memcpy(mine, in, n * es);
          rounds_.PublishCopiedIn(round.number);
        }
        for (int j = 0; j < p; ++j) {
          if (j == me) continue;
          if (absl::Status s = rounds_.WaitCopiedIn(j, round.number); !s.ok()) return s;
          if (absl::Status s = rounds_.CheckFingerprint(j, round.number); !s.ok()) return s;
          CopyOut(stream, recv + (j * block + offset) * es, rounds_.Data(j, round), n * es);
        }
        return absl::OkStatus();
      });
  if (stream) StreamingCopyDone();
  return status;
}

absl::Status ShmDirect::Broadcast() {
  if (FitsInLine(args_)) return LineRound();
  const bool is_root = peers_.rank() == args_.root;
  // In the arena, local rank == rank: shm_direct runs only when every rank shares this host.
  const int root = args_.root;
  const size_t es = args_.element_bytes();
  const size_t piece = std::max<size_t>(1, kPieceBytes / es);
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const absl::Status status = ForEachRound(
      args_.count, kHalfBytes / es, 1, [&](size_t offset, size_t n, const Round& round) {
        // The root announces the round (and its envelope) first and then publishes its data
        // piece by piece: a receiver copies one piece out while the root copies the next in.
        if (is_root) {
          rounds_.PublishCopiedIn(round.number);
        } else {
          if (absl::Status s = rounds_.WaitCopiedIn(root, round.number); !s.ok()) return s;
          if (absl::Status s = rounds_.CheckFingerprint(root, round.number); !s.ok()) return s;
        }
        size_t pieces = 0;
        for (size_t at = 0; at < n; at += piece) {
          const size_t m = std::min(piece, n - at);
          const uint64_t mark = ArenaRounds::ChunkMark(round.number, ++pieces);
          if (is_root) {
            std::memcpy(round.mine + at * es, send + (offset + at) * es, m * es);
            arena_.Publish(ArenaRounds::kChunks, mark);
            continue;
          }
          if (absl::Status s = rounds_.WaitFor(root, ArenaRounds::kChunks, mark); !s.ok()) {
            return s;
          }
          std::memcpy(recv + (offset + at) * es, rounds_.Data(root, round) + at * es, m * es);
        }
        return absl::OkStatus();
      });
  // The root's own output last: the receivers need only its half.
  if (status.ok() && is_root && send != recv) std::memcpy(recv, send, args_.count * es);
  return status;
}

absl::Status ShmDirect::Reduce() {
  if (FitsInLine(args_)) return LineRound();
  const bool is_root = peers_.rank() == args_.root;
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  return ForEachRound(
      args_.count, kHalfBytes / es, 1, [&](size_t offset, size_t n, const Round& round) {
        if (absl::Status s = CopyIn(round, send + offset * es, n * es); !s.ok()) return s;
        // Every rank reduces one slice; the root collects them.
        const Partition slices(n, arena_.local_size());
        ReduceSlice(round, slices);
        return is_root ? GatherSlices(round, slices, recv + offset * es) : absl::OkStatus();
      });
}

absl::Status ShmDirect::Barrier() { return LineRound(); }

absl::Status ShmDirect::LineRound() {
  absl::StatusOr<ArenaRounds::Round> round = rounds_.Begin();
  if (!round.ok()) return round.status();
  PostLine(round->number);
  return FinishLine();
}

void ShmDirect::PostLine(uint64_t round) {
  line_round_ = round;
  // Every rank's line carries its part of a reduction or its block of an all-gather; of a
  // broadcast, only the root's carries data; a barrier's carries none.
  const bool carries = args_.kind == OpKind::kAllReduce || args_.kind == OpKind::kReduce ||
                       args_.kind == OpKind::kAllGather ||
                       (args_.kind == OpKind::kBroadcast && peers_.rank() == args_.root);
  rounds_.PublishLine(round, args_.send, carries ? args_.count * args_.element_bytes() : 0);
}

absl::Status ShmDirect::FinishLine() {
  if (absl::Status s = rounds_.WaitLines(line_round_); !s.ok()) return s;
  const bool is_root = peers_.rank() == args_.root;
  const size_t bytes = args_.count * args_.element_bytes();
  // Local rank r's data: my own input, or what r published. In the arena, local rank == rank:
  // shm_direct runs only when every rank shares this host.
  const auto data_of = [&](int r) -> const void* {
    return r == arena_.local_rank() ? args_.send : rounds_.LineData(r, line_round_, bytes);
  };
  if (args_.kind == OpKind::kAllReduce || (args_.kind == OpKind::kReduce && is_root)) {
    for (int j = 0; j < arena_.local_size(); ++j) sources_[j] = data_of(j);
    ReduceMany(args_.dtype, args_.op, args_.recv, sources_.data(), arena_.local_size(),
               args_.count);
  } else if (args_.kind == OpKind::kBroadcast) {
    const void* from = data_of(args_.root);
    if (from != args_.recv) std::memcpy(args_.recv, from, bytes);
  } else if (args_.kind == OpKind::kAllGather) {
    for (int j = 0; j < arena_.local_size(); ++j) {
      const void* from = data_of(j);
      std::byte* to = static_cast<std::byte*>(args_.recv) + j * bytes;
      if (from != to) std::memcpy(to, from, bytes);
    }
  }
  rounds_.Finish(line_round_);
  return absl::OkStatus();
}

}  // namespace weft
