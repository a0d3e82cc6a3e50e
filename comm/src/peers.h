// Peers: what an algorithm sees of its communicator while it runs.
//
// It owns the links to every other rank and the shared-memory arena of this host, and stamps
// every message with the running operation's envelope, so algorithms only say "send these bytes
// to rank 3 as step 2" and "wait for these transfers". Used by one thread at a time (the engine
// runs one operation at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "deadline.h"
#include "node_layout.h"
#include "shared_buffers.h"
#include "transport/link.h"
#include "transport/shm/arena.h"

namespace weft {

// A queued send or receive, to be passed to Peers::Wait.
struct Transfer {
  Link* link = nullptr;
  uint64_t id = 0;
  bool is_send = false;
};

class Peers {
 public:
  // `links` is indexed by rank (nullptr for this rank). `arena` is null unless every rank of the
  // communicator shares this host. `oversubscribed`: ranks share cores, so waits yield (Backoff).
  Peers(int rank, int size, std::vector<std::unique_ptr<Link>> links,
        std::unique_ptr<ShmArena> arena, bool oversubscribed);
  ~Peers();

  int rank() const { return rank_; }
  int size() const { return size_; }
  ShmArena* arena() const { return arena_.get(); }
  bool oversubscribed() const { return oversubscribed_; }
  Link* link(int peer) const { return links_[peer].get(); }
  // Which ranks share a node; the hierarchical algorithms plan their sub-groups from it.
  const NodeLayout& nodes() const { return nodes_; }
  void SetNodes(NodeLayout nodes) { nodes_ = std::move(nodes); }

  // Called by the engine before an algorithm runs: the envelope every message of this
  // operation carries (its step is filled per message) and the deadline bounding it.
  void Begin(const Envelope& base, const Deadline& deadline);
  const Deadline& deadline() const { return deadline_; }
  const Envelope& envelope() const { return base_; }

  Transfer Send(int peer, uint32_t step, const void* data, size_t bytes);
  Transfer Recv(int peer, uint32_t step, RecvSink sink, size_t bytes);
  // With an explicit envelope (point-to-point messages number themselves per pair).
  Transfer SendAs(int peer, const Envelope& envelope, const void* data, size_t bytes);
  Transfer RecvAs(int peer, const Envelope& envelope, RecvSink sink, size_t bytes);

  // Drives every link with queued transfers until all of `transfers` are done. Errors name the
  // peer and transport; the deadline bounds the wait.
  absl::Status Wait(absl::Span<const Transfer> transfers);
  absl::Status Wait(std::initializer_list<Transfer> transfers) {
    return Wait(absl::MakeConstSpan(transfers.begin(), transfers.size()));
  }

  // Per rank, who its process is ("pid 4321 on host node7"): link errors name it. Set once
  // before the first operation.
  void SetProcessNames(std::vector<std::string> names) { process_names_ = std::move(names); }

  // A 64-byte-aligned buffer of at least `bytes`, kept between operations. `index` selects one
  // of several independent buffers.
  std::byte* Scratch(size_t bytes, int index = 0);

  // Peers' AllocShared buffers mapped here, for the direct-read algorithms.
  PeerBufferMaps& peer_buffers() { return peer_buffers_; }

  // The shared-memory direct algorithms number their rounds on the arena's counters; every rank
  // advances this identically, so round numbers agree across ranks.
  uint64_t NextArenaRound() { return ++arena_round_; }
  uint64_t arena_round() const { return arena_round_; }
  // The latest round in which this rank saw every other rank begin: all of them had finished
  // every earlier round, so halves of earlier rounds are free without asking them.
  uint64_t arena_synced_round() const { return arena_synced_round_; }
  void NoteArenaSynced(uint64_t round) { arena_synced_round_ = round; }

 private:
  struct ScratchBuffer {
    std::byte* data = nullptr;
    size_t bytes = 0;
  };

  void Activate(Link* link);
  absl::Status LinkError(const Link& link, const absl::Status& status) const;

  const int rank_;
  const int size_;
  const bool oversubscribed_;
  std::vector<std::unique_ptr<Link>> links_;
  std::unique_ptr<ShmArena> arena_;
  NodeLayout nodes_;
  std::vector<Link*> active_;  // links with transfers that may still be moving
  std::vector<pollfd> pollfds_;
  std::vector<ScratchBuffer> scratch_;
  std::vector<std::string> process_names_;
  Envelope base_;
  Deadline deadline_ = Deadline::In(absl::InfiniteDuration());
  uint64_t arena_round_ = 0;
  uint64_t arena_synced_round_ = 0;
  PeerBufferMaps peer_buffers_;
};

}  // namespace weft
