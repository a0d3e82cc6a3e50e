#include "algorithms/shm_direct.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

// One half of a rank's area: a round's chunk. Big enough to amortise the two synchronisations
// per round, small enough that p halves stay in this machine's caches between copy-in and use.
constexpr size_t kHalfBytes = 512 << 10;
// All-reduces up to this many bytes per rank take the single-phase path.
constexpr size_t kOneShotBytes = 16 << 10;

// Arena counters, one set per rank.
constexpr int kCopiedIn = 0;  // my chunk of round R is in my half
constexpr int kReduced = 1;   // my slice of round R is reduced, in my half
constexpr int kDone = 2;      // I no longer read anyone's half of round R
// Each half starts with one cache line holding the envelope of the operation whose first round
// used it: peers read a rank's fingerprint with a single cache miss, and the round protocol that
// protects the data (kDone before reuse) protects it too.
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(Envelope) <= kHeaderBytes);

}  // namespace

size_t ShmDirect::AreaBytes() { return 2 * (kHeaderBytes + kHalfBytes); }

ShmDirect::ShmDirect(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), arena_(*peers.arena()), args_(args), sources_(arena_.local_size()) {}

std::byte* ShmDirect::Header(int local_rank, uint64_t round) const {
  return arena_.area(local_rank) + (round % 2) * (kHeaderBytes + kHalfBytes);
}

std::byte* ShmDirect::Half(int local_rank, uint64_t round) const {
  return Header(local_rank, round) + kHeaderBytes;
}

absl::Status ShmDirect::WaitAll(int counter, uint64_t round) {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j == arena_.local_rank()) continue;
    if (absl::Status s = arena_.WaitAtLeast(j, counter, round, peers_.deadline()); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::byte*> ShmDirect::BeginRound(uint64_t round) {
  if (round > 2) {
    if (absl::Status s = WaitAll(kDone, round - 2); !s.ok()) return s;
  }
  if (first_round_ == 0) {
    first_round_ = round;
    PublishFingerprint(round);
  }
  return Half(arena_.local_rank(), round);
}

void ShmDirect::PublishFingerprint(uint64_t round) {
  std::memcpy(Header(arena_.local_rank(), round), &peers_.envelope(), sizeof(Envelope));
}

absl::Status ShmDirect::CheckFingerprint(int local_rank, uint64_t round) const {
  if (round != first_round_ || local_rank == arena_.local_rank()) return absl::OkStatus();
  Envelope theirs;
  std::memcpy(&theirs, Header(local_rank, round), sizeof(theirs));
  const Envelope& mine = peers_.envelope();
  if (theirs == mine) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("mismatched collective: rank ", local_rank, " called ", DescribeEnvelope(theirs),
                   " while this rank called ", DescribeEnvelope(mine)));
}

absl::Status ShmDirect::CheckAllFingerprints(uint64_t round) const {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (absl::Status s = CheckFingerprint(j, round); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ShmDirect::Finish(uint64_t round) { arena_.Publish(kDone, round); }

absl::Status ShmDirect::Run() {
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

absl::Status ShmDirect::CopyIn(uint64_t round, std::byte* mine, const std::byte* chunk,
                               size_t bytes) {
  std::memcpy(mine, chunk, bytes);
  arena_.Publish(kCopiedIn, round);
  if (absl::Status s = WaitAll(kCopiedIn, round); !s.ok()) return s;
  return CheckAllFingerprints(round);
}

void ShmDirect::ReduceSlice(uint64_t round, std::byte* mine, const Partition& slices) {
  const size_t at = slices.offset(arena_.local_rank()) * args_.element_bytes();
  for (int j = 0; j < arena_.local_size(); ++j) sources_[j] = Half(j, round) + at;
  ReduceMany(args_.dtype, args_.op, mine + at, sources_.data(), arena_.local_size(),
             slices.size(arena_.local_rank()));
  arena_.Publish(kReduced, round);
}

absl::Status ShmDirect::GatherSlices(uint64_t round, const Partition& slices, std::byte* out) {
  const size_t es = args_.element_bytes();
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j != arena_.local_rank()) {
      if (absl::Status s = arena_.WaitAtLeast(j, kReduced, round, peers_.deadline()); !s.ok()) {
        return s;
      }
    }
    const size_t at = slices.offset(j) * es;
    std::memcpy(out + at, Half(j, round) + at, slices.size(j) * es);
  }
  return absl::OkStatus();
}

template <typename Body>
absl::Status ShmDirect::ForEachRound(size_t count, size_t chunk, Body body) {
  for (size_t offset = 0; offset < count; offset += chunk) {
    const size_t n = std::min(chunk, count - offset);
    const uint64_t round = peers_.NextArenaRound();
    absl::StatusOr<std::byte*> mine = BeginRound(round);
    if (!mine.ok()) return mine.status();
    if (absl::Status s = body(offset, n, round, *mine); !s.ok()) return s;
    Finish(round);
  }
  return absl::OkStatus();
}

absl::Status ShmDirect::AllReduce() {
  const int p = arena_.local_size();
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  return ForEachRound(
      args_.count, kHalfBytes / es, [&](size_t offset, size_t n, uint64_t round, std::byte* mine) {
        if (absl::Status s = CopyIn(round, mine, send + offset * es, n * es); !s.ok()) return s;
        if (n * es <= kOneShotBytes) {
          for (int j = 0; j < p; ++j) sources_[j] = Half(j, round);
          ReduceMany(args_.dtype, args_.op, recv + offset * es, sources_.data(), p, n);
          return absl::OkStatus();
        }
        const Partition slices(n, p);
        ReduceSlice(round, mine, slices);
        return GatherSlices(round, slices, recv + offset * es);
      });
}

absl::Status ShmDirect::ReduceScatter() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const size_t block = args_.count;  // elements per rank
  const size_t chunk = std::max<size_t>(1, kHalfBytes / es / p);
  return ForEachRound(block, chunk, [&](size_t offset, size_t n, uint64_t round, std::byte* mine) {
    // Slot j of my half holds my contribution to rank j's block.
    for (int j = 0; j < p; ++j) {
      std::memcpy(mine + j * chunk * es, send + (j * block + offset) * es, n * es);
    }
    arena_.Publish(kCopiedIn, round);
    if (absl::Status s = WaitAll(kCopiedIn, round); !s.ok()) return s;
    if (absl::Status s = CheckAllFingerprints(round); !s.ok()) return s;
    for (int j = 0; j < p; ++j) sources_[j] = Half(j, round) + me * chunk * es;
    ReduceMany(args_.dtype, args_.op, recv + offset * es, sources_.data(), p, n);
    return absl::OkStatus();
  });
}

absl::Status ShmDirect::AllGather() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const size_t block = args_.count;
  const bool in_place = send == recv + me * block * es;
  if (!in_place) std::memcpy(recv + me * block * es, send, block * es);
  return ForEachRound(
      block, kHalfBytes / es, [&](size_t offset, size_t n, uint64_t round, std::byte* mine) {
        std::memcpy(mine, send + offset * es, n * es);
        arena_.Publish(kCopiedIn, round);
        for (int j = 0; j < p; ++j) {
          if (j == me) continue;
          if (absl::Status s = arena_.WaitAtLeast(j, kCopiedIn, round, peers_.deadline());
              !s.ok()) {
            return s;
          }
          if (absl::Status s = CheckFingerprint(j, round); !s.ok()) return s;
          std::memcpy(recv + (j * block + offset) * es, Half(j, round), n * es);
        }
        return absl::OkStatus();
      });
}

absl::Status ShmDirect::Broadcast() {
  const bool is_root = peers_.rank() == args_.root;
  // In the arena, local rank == rank: shm_direct runs only when every rank shares this host.
  const int root = args_.root;
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  if (is_root && send != recv) std::memcpy(recv, send, args_.count * es);
  return ForEachRound(
      args_.count, kHalfBytes / es, [&](size_t offset, size_t n, uint64_t round, std::byte* mine) {
        if (is_root) {
          std::memcpy(mine, recv + offset * es, n * es);
          arena_.Publish(kCopiedIn, round);
          return absl::OkStatus();
        }
        if (absl::Status s = arena_.WaitAtLeast(root, kCopiedIn, round, peers_.deadline());
            !s.ok()) {
          return s;
        }
        if (absl::Status s = CheckFingerprint(root, round); !s.ok()) return s;
        std::memcpy(recv + offset * es, Half(root, round), n * es);
        return absl::OkStatus();
      });
}

absl::Status ShmDirect::Reduce() {
  const bool is_root = peers_.rank() == args_.root;
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  return ForEachRound(
      args_.count, kHalfBytes / es, [&](size_t offset, size_t n, uint64_t round, std::byte* mine) {
        if (absl::Status s = CopyIn(round, mine, send + offset * es, n * es); !s.ok()) return s;
        // Every rank reduces one slice; the root collects them.
        const Partition slices(n, arena_.local_size());
        ReduceSlice(round, mine, slices);
        return is_root ? GatherSlices(round, slices, recv + offset * es) : absl::OkStatus();
      });
}

absl::Status ShmDirect::Barrier() {
  const uint64_t round = peers_.NextArenaRound();
  if (absl::StatusOr<std::byte*> mine = BeginRound(round); !mine.ok()) return mine.status();
  arena_.Publish(kCopiedIn, round);
  if (absl::Status s = WaitAll(kCopiedIn, round); !s.ok()) return s;
  if (absl::Status s = CheckAllFingerprints(round); !s.ok()) return s;
  Finish(round);
  return absl::OkStatus();
}

}  // namespace weft
