// Shared-memory direct algorithms: every rank of the communicator is on this host and reads the
// others' data straight out of the ShmArena, instead of passing messages around a ring.
//
// Data moves in rounds of one arena half (double-buffered, so round k+1's copy-in overlaps the
// stragglers of round k). An all-reduce round is: copy my chunk in; reduce my 1/p slice of the
// chunk from all p areas at once (ReduceMany: one pass, fp16/bf16 rounded once); copy every
// rank's reduced slice out. Each rank thus reads its input once and writes its output once from
// and to its own memory, like a memcpy, while the cross-rank traffic stays in the caches. Small
// all-reduces skip the slice phase: every rank reduces the whole (tiny) chunk itself, which saves
// one synchronisation.
//
// Synchronisation is by monotonic counters in the arena (round numbers), never by resetting
// flags, so there is nothing to clean up between operations.
#pragma once

#include "absl/container/inlined_vector.h"
#include "algorithms/algorithm.h"

namespace weft {

class ShmDirect final : public Algorithm {
 public:
  ShmDirect(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

  // Bytes of each rank's arena area; ShmArena::Create is given this.
  static size_t AreaBytes();

 private:
  // Starts round `round` in arena half round % 2: waits until every rank is done with the round
  // that used this half before, and returns this rank's half.
  absl::StatusOr<std::byte*> BeginRound(uint64_t round);
  // The data of local rank `local_rank`'s half for `round`, and the cache line before it that
  // carries the fingerprint.
  std::byte* Half(int local_rank, uint64_t round) const;
  std::byte* Header(int local_rank, uint64_t round) const;
  absl::Status WaitAll(int counter, uint64_t round);
  // Operation fingerprints: published with the first round of an operation and compared by
  // every rank that waited on the publisher, so a mismatched collective fails on the spot.
  void PublishFingerprint(uint64_t round);
  absl::Status CheckFingerprint(int local_rank, uint64_t round) const;
  absl::Status CheckAllFingerprints(uint64_t round) const;
  // Moves `count` elements `chunk` at a time, one arena round per chunk: begins the round, runs
  // body(offset, n, round, my_half) for elements [offset, offset + n), then finishes the round.
  template <typename Body>
  absl::Status ForEachRound(size_t count, size_t chunk, Body body);

  // Marks round `round` done: this rank no longer reads anyone's half of it.
  void Finish(uint64_t round);

  // The phases of a reducing round. CopyIn puts this rank's chunk in its half, waits for every
  // rank's and checks fingerprints; ReduceSlice reduces this rank's slice of the chunk from all
  // halves into its own half; GatherSlices copies every rank's reduced slice to `out`.
  absl::Status CopyIn(uint64_t round, std::byte* mine, const std::byte* chunk, size_t bytes);
  void ReduceSlice(uint64_t round, std::byte* mine, const Partition& slices);
  absl::Status GatherSlices(uint64_t round, const Partition& slices, std::byte* out);

  absl::Status AllReduce();
  absl::Status ReduceScatter();
  absl::Status AllGather();
  absl::Status Broadcast();
  absl::Status Reduce();
  absl::Status Barrier();

  Peers& peers_;
  ShmArena& arena_;
  const CollectiveArgs args_;
  absl::InlinedVector<const void*, 8> sources_;  // per-round ReduceMany inputs
  uint64_t first_round_ = 0;  // the round that carries this operation's fingerprint
};

}  // namespace weft
