// Algorithm: one way of carrying out one collective, as a small class.
//
// The constructor plans (segment offsets, partners, chunking) from the arguments; Run() moves the
// data through Peers and returns when this rank's part is complete. An algorithm never divides
// for kAvg: the collective does that once at the end, whatever algorithm ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "op_kind.h"
#include "peers.h"
#include "weft/kernels/dtype.h"

namespace weft {

// The per-rank blocks of a variable-count collective, in elements (MPI's counts and
// displacements), one entry per rank. all_gather_v fills recv_*; reduce_scatter_v recv_counts
// and send_*, its blocks back to back in rank order; all_to_all_v all four.
struct BlockLayout {
  std::vector<size_t> send_counts, send_displs;
  std::vector<size_t> recv_counts, recv_displs;
};

struct CollectiveArgs {
  OpKind kind = OpKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as passed by the caller: per rank block for reduce_scatter, all_gather,
                     // all_to_all; whole buffer otherwise; for the *_v collectives every block
                     // of the large buffer (all_to_all_v: of this rank's send)
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  // The *_v collectives' blocks, null for the others. Shared and immutable: the operation
  // outlives the caller's vectors, and copies of the arguments stay cheap.
  std::shared_ptr<const BlockLayout> blocks;

  size_t element_bytes() const { return SizeOf(dtype); }
  // Whether input and output overlap, as in NCCL's in-place calls (an all-gather's input is its
  // block of the output, a reduce-scatter's output its block of the input). Out of place a
  // collective also copies what stays on its rank, which can change which algorithm is fastest.
  bool in_place(int ranks) const {
    const size_t block = count * element_bytes();
    const size_t all = block * static_cast<size_t>(ranks);
    const size_t in = kind == OpKind::kReduceScatter || kind == OpKind::kAllToAll ? all : block;
    const size_t out = kind == OpKind::kAllGather || kind == OpKind::kAllToAll ? all : block;
    const auto from = reinterpret_cast<uintptr_t>(send), to = reinterpret_cast<uintptr_t>(recv);
    return from < to + out && to < from + in;
  }
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual absl::Status Run() = 0;

  // An algorithm whose whole exchange is one posted part per rank (a tiny collective over the
  // arena) can begin without waiting, so that the submitting thread may run it while the peers
  // keep pace (Op::TryEagerly). Post publishes this rank's part and returns true, or does
  // nothing and returns false where posting would have to wait; after it, PeersPosted says
  // without waiting whether every peer's part is there, and Run completes the operation.
  virtual bool Post() { return false; }
  virtual bool PeersPosted() const { return false; }
};

// The numbering travels in envelopes: append only.
enum class AlgorithmId : uint32_t {
  kRing = 1,
  kRabenseifner = 2,
  kShmDirect = 3,
  kTree = 4,               // binomial tree (broadcast, reduce)
  kPairwise = 5,           // all-to-all
  kDissemination = 6,      // barrier over links
  kHierarchical = 7,       // two-level: inside nodes, then across them (hierarchical.h)
  kCmaDirect = 8,          // one host, peers' buffers read in place (cma_direct.h)
  kRecursiveDoubling = 9,  // all-reduce of small messages (recursive_doubling.h)
};

const char* Name(AlgorithmId id);
std::optional<AlgorithmId> ParseAlgorithm(absl::string_view name);

// Whether `id` implements `kind`; and whether it can run on this communicator (shm_direct needs
// every rank on one host, cma_direct also needs cross-memory attach between them).
bool Implements(AlgorithmId id, OpKind kind);
bool Usable(AlgorithmId id, const Peers& peers);
// Why `id` cannot run on this communicator, "" where it can or where the communicator has one
// rank; `transport` (the communicator's WEFT_TRANSPORT) is named where it is the reason.
std::string Unusable(AlgorithmId id, const Peers& peers, absl::string_view transport);

std::unique_ptr<Algorithm> MakeAlgorithm(AlgorithmId id, Peers& peers, const CollectiveArgs& args);
// The envelope every message of collective `seq` carries when `algorithm` runs it over `args`
// (its step filled per message).
Envelope MakeEnvelope(const CollectiveArgs& args, AlgorithmId algorithm, uint64_t seq);
// Whether `id`'s algorithm for `args` implements Post (above).
bool Posts(AlgorithmId id, const CollectiveArgs& args);

// Splits `count` elements into `parts` nearly equal contiguous parts: the first count % parts
// parts get one element more. Every algorithm that scatters data across ranks uses this layout.
struct Partition {
  Partition(size_t count, int parts) : count_(count), parts_(parts) {}
  size_t offset(int part) const {
    const size_t base = count_ / parts_, extra = count_ % parts_;
    return base * part + std::min<size_t>(part, extra);
  }
  size_t size(int part) const {
    return count_ / parts_ + (static_cast<size_t>(part) < count_ % parts_ ? 1 : 0);
  }

 private:
  size_t count_;
  int parts_;
};

}  // namespace weft
