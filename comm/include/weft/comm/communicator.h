// Communicator: a group of ranks (processes) that run collectives and point-to-point transfers.
//
//   auto comm = weft::Communicator::CreateFromEnvironment();   // under weftrun, mpirun, torchrun
//   if (!comm.ok()) { ... }
//   weft::Work w = (*comm)->AllReduce(grads, grads, n, weft::DataType::kFloat32,
//   weft::ReduceOp::kSum);
//   ... compute ...
//   if (absl::Status s = w.Wait(); !s.ok()) { ... }   // names rank, peer, operation and seq
//
// Semantics follow NCCL: buffers are host memory; count is in elements; in-place means the
// send and receive pointers are equal (for reduce_scatter and all_gather: the rank's block of the
// large buffer). Every call returns at once with a Work; operations complete in issue order; the
// buffers must stay valid and untouched until the Work finishes. Errors are values: invalid
// arguments give a finished Work with InvalidArgument; a failed operation (peer died, timeout,
// mismatched collective) fails its Work and every later operation on the communicator with a
// message naming this rank, the peer, the operation and its sequence number.
//
// All ranks must issue the same collectives in the same order with the same count (for the *_v
// collectives: counts), type, operator and root. Point-to-point messages between a pair of ranks
// are delivered in the order they were sent, and a receive must match the next message from that
// peer (same tag and size).
//
// Configuration: CommOptions, each field defaulting to its WEFT_* environment variable
// (docs/ARCHITECTURE.md lists them).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/work.h"
#include "weft/kernels/dtype.h"

namespace weft {

struct CommOptions {
  // Bound on every operation and on creation. Default: WEFT_TIMEOUT (seconds), else 300 s.
  absl::Duration timeout = absl::ZeroDuration();
  // Forces an algorithm: "ring", "rabenseifner", "recursive_doubling", "shm_direct", "tree",
  // "pairwise", or per
  // collective "all_reduce=ring,broadcast=tree"; "auto" forces nothing. Default: WEFT_ALGO, else
  // chosen per call.
  std::string algorithm;
  // "auto" (shared memory within a host, TCP across hosts), "tcp", "shm", or "ucx" (UCX across
  // hosts, shared memory within one; only in builds with UCX).
  // Default: WEFT_TRANSPORT, else "auto".
  std::string transport;
  // Whether the collectives' buffers come from AllocShared (shared_memory.h) on every rank, as
  // nccl-tests' -R registers them: the tuner then prices the algorithms that read the peers'
  // buffers in place accordingly. Other buffers still work, only slower. Every rank must say the
  // same (checked at creation). Default: WEFT_SHARED_BUFFERS (1 or 0), else false.
  std::optional<bool> shared_buffers;
};

namespace internal {
class CommState;
}

class Communicator {
 public:
  // From the launcher's environment: weftrun, torchrun-style (MASTER_ADDR, MASTER_PORT, RANK,
  // WORLD_SIZE, LOCAL_RANK), Open MPI's mpirun, PMI or Slurm. See docs/ARCHITECTURE.md.
  static absl::StatusOr<std::unique_ptr<Communicator>> CreateFromEnvironment(
      const CommOptions& options = {});

  // NCCL-style: rank 0 calls CreateUniqueId() and hands the string to every rank, which then
  // calls Create(id, rank, size). Creating the id starts the rendezvous server in rank 0's
  // process; it lives until rank 0's communicator is destroyed. `host` is the address other
  // ranks use to reach this process (default: this host's name).
  static absl::StatusOr<std::string> CreateUniqueId(const std::string& host = "");
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const std::string& unique_id,
                                                              int rank, int size,
                                                              const CommOptions& options = {});

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // The ranks of this communicator on this rank's host, ascending: a node, as hierarchical
  // algorithms and hybrid sharding group ranks (from the host identities exchanged at creation,
  // which WEFT_HOSTNAME overrides).
  std::vector<int> NodeRanks() const;

  // recv[i] = op over ranks of send[i], on every rank. count elements each.
  Work AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // send holds size() blocks of recv_count elements; rank r receives the reduction of block r.
  Work ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  // recv receives size() blocks of send_count elements: block r is rank r's send.
  Work AllGather(const void* send, void* recv, size_t send_count, DataType type);
  // recv = root's send on every rank (send is read on the root only).
  Work Broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  // Root's recv = op over ranks of send (recv is written on the root only).
  Work Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  // send holds size() blocks of count elements; block j goes to rank j, whose recv block r
  // receives it from rank r.
  Work AllToAll(const void* send, void* recv, size_t count, DataType type);
  // Variable counts (MPI's *v collectives). Every rank passes the same counts vectors (size()
  // entries). Each call is an operation even where every count is 0; a block whose size two ranks
  // see differently fails it on every rank, as a mismatched collective does.
  //
  // all_gather_v: rank r contributes send_count = recv_counts[r] elements; recv receives
  // block r at recv_displs[r]. In place: send == recv + recv_displs[rank()] elements. Blocks may be
  // empty, lie in any order with gaps between them, but must not overlap.
  Work AllGatherV(const void* send, size_t send_count, void* recv,
                  const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                  DataType type);
  // reduce_scatter_v: send holds size() blocks back to back, block r of recv_counts[r] elements;
  // rank r receives the reduction of every rank's block r (recv_counts[rank()] elements).
  // In place: recv == send + the elements of the blocks before block rank().
  Work ReduceScatterV(const void* send, void* recv, const std::vector<size_t>& recv_counts,
                      DataType type, ReduceOp op);
  // all_to_all_v: block j of send (send_counts[j] elements at send_displs[j]) goes to rank j, whose
  // recv block r (recv_counts[r] at recv_displs[r]) receives it from rank r. Counts may be 0.
  // Here the counts differ by rank: rank j's recv_counts[r] must equal rank r's send_counts[j].
  // Receive blocks must not overlap; send blocks may, and send may overlap recv (in place).
  Work AllToAllV(const void* send, const std::vector<size_t>& send_counts,
                 const std::vector<size_t>& send_displs, void* recv,
                 const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                 DataType type);
  Work Barrier();

  // Point-to-point. Inside GroupStart()/GroupEnd() the transfers of the group progress together,
  // so any pattern of sends and receives among the group completes (as in ncclGroupStart).
  Work Send(const void* data, size_t count, DataType type, int peer, int tag = 0);
  Work Recv(void* data, size_t count, DataType type, int peer, int tag = 0);
  void GroupStart();
  // Issues the grouped transfers as one operation; every Work returned inside the group
  // finishes with it.
  Work GroupEnd();

  // Collective over this communicator: ranks passing the same color form a new communicator,
  // ordered by (key, rank). A negative color returns nullptr (the rank joins none). The child
  // shares the parent's rendezvous store and configuration.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key);
  // As above, with the child configured by `options` (each field read as at creation) instead of
  // inheriting the parent's: e.g. a child that forces another algorithm, so that one job can
  // time several algorithms side by side.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key,
                                                      const CommOptions& options);

  // Ends every pending operation with Cancelled, promptly and from any thread; the communicator
  // is unusable afterwards (destroy it; new communicators can still be created).
  void Abort();

  // Writes this rank's flight recorder (the last operations: what, when, how they ended) as
  // JSON and returns the file's path. Also written on its own when an operation fails or times
  // out, when another rank fails, and on SIGUSR1. tools/weft-trace merges the ranks' files;
  // docs/TROUBLESHOOTING.md describes them.
  absl::StatusOr<std::string> DumpFlightRecorder(const std::string& reason = "requested") const;

  // The algorithm the communicator would use for a collective of this size (for benchmarks and
  // WEFT_DEBUG output): e.g. "ring", "shm_direct".
  std::string AlgorithmFor(const std::string& collective, size_t bytes) const;
  // The tuner's predicted seconds for that algorithm (negative when it cannot price it), and one
  // line with every candidate's prediction and where the model's numbers came from, for
  // benchmarks that print predicted against measured times. `bytes` as for AlgorithmFor: the
  // buffer of all_reduce, broadcast and reduce, all ranks' blocks of the others.
  double PredictedSeconds(const std::string& collective, size_t bytes) const;
  // The same for a named algorithm ("ring", "pairwise", ...), chosen or not: what a caller that
  // builds a collective of its own from this one's pattern (the compressed reduce-scatter) weighs.
  double PredictedSeconds(const std::string& collective, size_t bytes,
                          const std::string& algorithm) const;
  std::string ExplainAlgorithm(const std::string& collective, size_t bytes) const;

 private:
  friend class CommunicatorFactory;
  explicit Communicator(std::shared_ptr<internal::CommState> state);
  std::shared_ptr<internal::CommState> state_;
};

}  // namespace weft
