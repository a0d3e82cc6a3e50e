// Shared-memory direct algorithms: every rank of the communicator is on this host and reads the
// others' data straight out of the ShmArena, instead of passing messages around a ring.
//
// Data moves in rounds of one arena half (double-buffered, so round k+1's copy-in overlaps the
// stragglers of round k). An all-reduce round is: copy into my half the p-1 slices of my chunk
// that other ranks reduce; reduce my own 1/p slice from my input and the others' halves at once
// (ReduceMany: one pass, fp16/bf16 rounded once) into my output, and leave a copy in my half;
// copy every other rank's reduced slice out. Each rank thus reads its input once and writes its
// output once, like a memcpy, while the cross-rank traffic stays in the caches. A broadcast's
// root publishes its round piece by piece, so that the receivers copy out while it copies in. A
// large out-of-place output is written with non-temporal stores, which spares reading every line
// of it from memory before overwriting it. Small all-reduces skip the slice phase: every rank
// reduces the whole (tiny) chunk itself, which saves one synchronisation. Barriers, and
// all-reduces, reduces, broadcasts and all-gathers of up to ArenaRounds::kLineRoundBytes a rank,
// take one line round: one signal per rank, and they may run on the submitting thread (Post,
// Engine).
//
// Synchronisation is by monotonic counters in the arena (round numbers), never by resetting
// flags, so there is nothing to clean up between operations.
#pragma once

#include "absl/container/inlined_vector.h"
#include "algorithms/algorithm.h"
#include "algorithms/arena_rounds.h"

namespace weft {

class ShmDirect final : public Algorithm {
 public:
  ShmDirect(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

  // Whether `args` travel in one line round (a barrier; all-reduces, reduces, broadcasts and
  // all-gathers of up to kLineRoundBytes a rank): then Post can begin the operation without
  // waiting.
  static bool FitsInLine(const CollectiveArgs& args);
  bool Post() override;
  bool PeersPosted() const override;

 private:
  // Moves `count` elements `chunk` at a time, one arena round per chunk: begins the round, whose
  // data takes `slots` slots of SlotBytes(n) in each half, runs body(offset, n, round) for
  // elements [offset, offset + n), then finishes the round.
  using Round = ArenaRounds::Round;
  template <typename Body>
  absl::Status ForEachRound(size_t count, size_t chunk, int slots, Body body);
  // The bytes `n` elements take in a half, rounded up to whole cache lines.
  size_t SlotBytes(size_t n) const { return (n * args_.element_bytes() + 63) / 64 * 64; }

  // The phases of a reducing round. CopyIn puts this rank's chunk in its half, waits for every
  // rank's and checks fingerprints; ReduceSlice reduces this rank's slice of the chunk from all
  // halves into its own half; GatherSlices copies every rank's reduced slice to `out`.
  absl::Status CopyIn(const Round& round, const std::byte* chunk, size_t bytes);
  void ReduceSlice(const Round& round, const Partition& slices);
  absl::Status GatherSlices(const Round& round, const Partition& slices, std::byte* out);

  // One line round (FitsInLine): PostLine publishes this rank's line of `round`, FinishLine
  // waits for the others' and reduces them.
  absl::Status LineRound();
  void PostLine(uint64_t round);
  absl::Status FinishLine();

  absl::Status AllReduce();
  absl::Status ReduceScatter();
  absl::Status AllGather();
  absl::Status Broadcast();
  absl::Status Reduce();
  absl::Status Barrier();

  Peers& peers_;
  ArenaRounds rounds_;
  ShmArena& arena_;
  const CollectiveArgs args_;
  absl::InlinedVector<const void*, 8> sources_;  // per-round ReduceMany inputs
  uint64_t line_round_ = 0;                      // the posted line round, if any
};

}  // namespace weft
