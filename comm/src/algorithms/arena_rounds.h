// ArenaRounds: the round protocol that the algorithms over a ShmArena share.
//
// Every operation of such an algorithm takes one or more rounds, numbered identically on every
// rank (Peers::NextArenaRound). Round R uses half R % 2 of every rank's arena area and the
// kCopiedIn counter of the same parity. Before a rank writes into either it waits until every
// rank has finished the round that used them before (R - 2), so they are reused without
// resetting anything: counters only grow. The kCopiedIn line carries the operation's envelope
// beside the round number, which every peer compares with its own on the operation's first
// round: a mismatched collective fails on the spot with both descriptions, and the check costs
// no cache-line transfer besides the signal itself.
//
// Small operations (a barrier, an 8-byte all-reduce, a 4 KiB all-gather) take a line round: each
// rank publishes its envelope in the cache line of its line counter, with the data when it fits
// there, so that a peer gets the signal, the fingerprint and a few bytes in one cache-line
// transfer; larger data waits in the rank's half. One signal per rank, where a full round takes
// two.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "peers.h"
#include "transport/shm/arena.h"

namespace weft {

class ArenaRounds {
 public:
  // Bytes of data per half, and of each rank's arena area (ShmArena::Create is given this).
  static constexpr size_t kHalfBytes = 512 << 10;
  static size_t AreaBytes();

  // Arena counters, one set per rank; values are round numbers unless said otherwise.
  static constexpr int kCopiedIn = 0;  // and 1 (R % 2 picks): my data (or my buffer addresses)
                                       // of round R are posted, or for a broadcast's root, R has
                                       // begun and its data follows on kChunks; the payload is
                                       // my envelope
  static constexpr int kReduced = 2;   // my reduced part of round R is ready
  static constexpr int kDone = 3;      // I no longer read anyone's half or buffers of round R
  static constexpr int kChunks = 4;    // ChunkMark(R, chunks or pieces of round R I have
                                       // finished so far)
  static constexpr int kLine = 5;      // and 6: round R's line (R % 2 picks), with its payload

  // A kChunks value: the round sits in the high bits, so that the counter grows across rounds.
  static uint64_t ChunkMark(uint64_t round, size_t chunks) { return (round << 24) | chunks; }

  // Bytes of data a line carries besides the envelope.
  static constexpr size_t kLineBytes = ShmArena::kPayloadBytes - sizeof(Envelope);
  // The most a line round passes per rank. Beyond kLineBytes the data waits in the rank's half of
  // the round (free once the round has begun; in a window that moves as Begin's do), and the line
  // carries only the envelope and the signal: still one signal per round, where a full round
  // takes two.
  static constexpr size_t kLineRoundBytes = 16384;

  explicit ArenaRounds(Peers& peers) : peers_(peers), arena_(*peers.arena()) {}

  ShmArena& arena() const { return arena_; }

  // Starts a new round whose data takes `bytes` (<= kHalfBytes) of each rank's half: waits until
  // every rank is done with the round that used the same half, and returns the round number and
  // where its data lies.
  //
  // Every rank passes the same `bytes` for a round. A round of up to half the half does not start
  // where the half's previous round did: its window moves on each time the half comes round. The
  // peers still hold the previous round's lines in their caches, and writing over them would
  // first invalidate every one of those copies.
  struct Round {
    uint64_t number;
    size_t window;    // the data's offset in every rank's half
    std::byte* mine;  // this rank's data: Data(local_rank, *this)
  };
  absl::StatusOr<Round> Begin(size_t bytes = 0);
  // Local rank `r`'s data of `round`.
  std::byte* Data(int r, const Round& round) const { return Half(r, round.number) + round.window; }
  // Whether Begin would return at once, without waiting for anybody.
  bool CanBeginNow() const;
  // Marks `round` done on this rank.
  void Finish(uint64_t round) { arena_.Publish(kDone, round); }

  // Local rank `r`'s half of `round`.
  std::byte* Half(int r, uint64_t round) const;

  // Waits until every other rank's `counter` is >= `value`.
  absl::Status WaitAll(int counter, uint64_t value) const;
  // Publishes kCopiedIn of `round`, with this operation's envelope.
  void PublishCopiedIn(uint64_t round);
  // Waits for rank `r`'s kCopiedIn of `round`.
  absl::Status WaitCopiedIn(int r, uint64_t round) const;
  // WaitCopiedIn for every other rank, noting that every rank has begun `round`.
  absl::Status WaitAllBegun(uint64_t round);

  // A line round: publishes `bytes` (<= kLineRoundBytes) of `data` with the operation's envelope,
  // waits for every rank's line and compares their envelopes; then LineData(r, round, bytes) is
  // rank r's data (every rank passes the same `bytes`).
  // It publishes kCopiedIn too, so that a rank that mistakenly runs another kind of round here
  // finds the fingerprint there and reports the mismatch.
  void PublishLine(uint64_t round, const void* data, size_t bytes);
  absl::Status WaitLines(uint64_t round);
  // Whether every other rank has published its line of `round`; never waits.
  bool LinesPosted(uint64_t round) const;
  const std::byte* LineData(int r, uint64_t round, size_t bytes) const;
  // Waits for rank `r`'s `counter` to reach `value`.
  absl::Status WaitFor(int r, int counter, uint64_t value) const {
    return arena_.WaitAtLeast(r, counter, value, peers_.deadline());
  }

  // Compares rank `r`'s fingerprint (or every rank's) with this rank's operation; a no-op unless
  // `round` is the operation's first. Call after WaitCopiedIn(r, round).
  absl::Status CheckFingerprint(int r, uint64_t round) const;
  absl::Status CheckAllFingerprints(uint64_t round) const;

 private:
  // Whether beginning `round` must first see every rank done with round - 2.
  bool MustWaitForDone(uint64_t round) const;
  // Where in every rank's half the data of `round` lies, when it takes `bytes` (Begin).
  static size_t Window(uint64_t round, size_t bytes);
  // Compares the envelope rank `r` published at `published` with this rank's.
  absl::Status CompareEnvelope(int r, const std::byte* published) const;

  Peers& peers_;
  ShmArena& arena_;
  uint64_t first_round_ = 0;  // the operation's first round, whose fingerprint peers compare
};

}  // namespace weft
