// Direct-read algorithms: every rank of the communicator is on this host, and each rank reads
// the others' user buffers in place: with process_vm_readv (Linux cross-memory attach, CMA), or,
// for buffers from AllocShared (weft/comm/shared_memory.h), with plain loads from a mapping.
//
// ShmDirect stages every byte through the shared arena: copy in, reduce out of the peers' halves,
// copy out, and the peers' halves must travel from the other core's cache line by line. For large
// messages that costs more than the data itself. Here the arena carries only the buffers'
// addresses and progress counters; the data crosses once, in a kernel copy from the peer's buffer
// (or straight out of its mapping):
//
//   all-reduce: rank r owns block r of the buffer. It reads block r of every peer's input into an
//   L2-sized staging chunk and reduces it with its own input straight into its output
//   (ReduceMany: one pass, fp16/bf16 rounded once), publishing a chunk counter; it then reads each
//   peer's reduced chunks straight out of that peer's output into its own. The two phases are
//   interleaved chunk by chunk, so a peer's reduced chunk is read while still in cache.
//   reduce-scatter: the first phase alone. all-gather and broadcast: one read per peer block.
//
// A rank returns only when every peer has finished reading its buffers (the kDone counter), so the
// caller may reuse them at once. Used when the arena found that every rank may read every other's
// memory (same user, no ptrace restriction); AlgorithmSelector picks it for large messages.
#pragma once

#include "absl/container/inlined_vector.h"
#include "algorithms/algorithm.h"
#include "algorithms/arena_rounds.h"
#include "shared_buffers.h"

namespace weft {

class CmaDirect final : public Algorithm {
 public:
  CmaDirect(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  // Where a rank's buffers live, posted in its arena half: addresses in its own address space,
  // and their place in shared buffers, if they lie in any.
  struct Buffers {
    uint64_t send;
    uint64_t recv;
    SharedLocation shared_send;
    SharedLocation shared_recv;
  };
  // A peer's buffer as this rank reaches it: mapped here, or at an address for process_vm_readv.
  struct Remote {
    const std::byte* mapped = nullptr;
    uint64_t address = 0;
  };

  absl::Status AllReduce();
  absl::Status ReduceScatter();
  absl::Status AllGather();
  absl::Status Broadcast();

  // Learns every rank's buffers from its arena half and maps the shared ones.
  absl::Status Resolve();
  // Copies `bytes` at byte `at` of local rank `r`'s buffer `from` to `to` (from a mapped buffer
  // with CopyOut(stream_out_)); `what` names the buffer in the error.
  absl::Status ReadFrom(int r, const Remote& from, size_t at, void* to, size_t bytes,
                        const char* what) const;
  // Reduces one chunk, at byte `at`, of every peer's send buffer with this rank's `own` chunk
  // into `out`; peers' chunks that are not mapped are read into staging first.
  absl::Status ReduceChunk(size_t at, const std::byte* own, std::byte* out, size_t n);

  Peers& peers_;
  ArenaRounds rounds_;
  ShmArena& arena_;
  const CollectiveArgs args_;
  uint64_t round_ = 0;
  bool stream_out_ = false;              // a large out-of-place output is written around the cache
  absl::InlinedVector<Remote, 8> send_;  // per local rank, this operation's buffers
  absl::InlinedVector<Remote, 8> recv_;
  absl::InlinedVector<const void*, 8> sources_;  // ReduceMany inputs
};

}  // namespace weft
