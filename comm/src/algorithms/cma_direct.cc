#include "algorithms/cma_direct.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/shm/streaming_copy.h"
#include "weft/kernels/reduce.h"
#include "weft/topology/host.h"

namespace weft {
namespace {

// Bytes per chunk and peer: the staging of one chunk from every peer, the rank's own input chunk
// and its output chunk stay in this machine's 2.5 MiB L2 while they are reduced.
constexpr size_t kChunkBytes = 256 << 10;
// Which Peers::Scratch buffer holds the staging.
constexpr int kStagingScratch = 3;

}  // namespace

CmaDirect::CmaDirect(Peers& peers, const CollectiveArgs& args)
    : peers_(peers),
      rounds_(peers),
      arena_(rounds_.arena()),
      args_(args),
      send_(arena_.local_size()),
      recv_(arena_.local_size()),
      sources_(arena_.local_size()) {}

absl::Status CmaDirect::Run() {
  // Post this rank's buffer addresses and learn everyone's (and check their fingerprints).
  absl::StatusOr<ArenaRounds::Round> round = rounds_.Begin();
  if (!round.ok()) return round.status();
  round_ = round->number;
  const size_t es = args_.element_bytes(), p = arena_.local_size();
  const size_t send_bytes = args_.count * es * (args_.kind == OpKind::kReduceScatter ? p : 1);
  const size_t recv_bytes = args_.count * es * (args_.kind == OpKind::kAllGather ? p : 1);
  const Buffers mine{reinterpret_cast<uint64_t>(args_.send), reinterpret_cast<uint64_t>(args_.recv),
                     LocateShared(args_.send, send_bytes), LocateShared(args_.recv, recv_bytes)};
  std::memcpy(round->mine, &mine, sizeof(mine));
  rounds_.PublishCopiedIn(round_);
  if (absl::Status s = rounds_.WaitAllBegun(round_); !s.ok()) return s;
  if (absl::Status s = rounds_.CheckAllFingerprints(round_); !s.ok()) return s;
  if (absl::Status s = Resolve(); !s.ok()) return s;

  absl::Status status;
  switch (args_.kind) {
    case OpKind::kAllReduce:
      status = AllReduce();
      break;
    case OpKind::kReduceScatter:
      status = ReduceScatter();
      break;
    case OpKind::kAllGather:
      status = AllGather();
      break;
    case OpKind::kBroadcast:
      status = Broadcast();
      break;
    default:
      return absl::InternalError("cma_direct does not implement this collective");
  }
  if (!status.ok()) return status;
  // The caller may reuse its buffers only once no peer reads them any more. Each collective marks
  // the round done (rounds_.Finish) as soon as it has read the last of the peers' data, so that
  // what it still does on its own overlaps their wait.
  return rounds_.WaitAll(ArenaRounds::kDone, round_);
}

absl::Status CmaDirect::Resolve() {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j == arena_.local_rank()) continue;
    Buffers theirs;
    std::memcpy(&theirs, rounds_.Half(j, round_), sizeof(theirs));
    send_[j] = Remote{nullptr, theirs.send};
    recv_[j] = Remote{nullptr, theirs.recv};
    for (auto [where, remote] :
         {std::pair{&theirs.shared_send, &send_[j]}, std::pair{&theirs.shared_recv, &recv_[j]}}) {
      if (where->id == 0) continue;
      absl::StatusOr<std::byte*> mapped = peers_.peer_buffers().Map(arena_.pid(j), *where);
      if (!mapped.ok()) {
        return absl::Status(mapped.status().code(),
                            absl::StrCat("cma_direct: mapping rank ", arena_.global_rank(j),
                                         "'s shared buffer (pid ", arena_.pid(j),
                                         "): ", mapped.status().message()));
      }
      remote->mapped = *mapped;
    }
  }
  return absl::OkStatus();
}

absl::Status CmaDirect::ReadFrom(int r, const Remote& from, size_t at, void* to, size_t bytes,
                                 const char* what) const {
  if (from.mapped != nullptr) {
    CopyOut(stream_out_, to, from.mapped + at, bytes);
    return absl::OkStatus();
  }
  auto* into = static_cast<std::byte*>(to);
  uint64_t address = from.address + at;
  while (bytes > 0) {
    iovec local{into, bytes};
    iovec remote{reinterpret_cast<void*>(address), bytes};
    const ssize_t got = process_vm_readv(arena_.pid(r), &local, 1, &remote, 1, 0);
    if (got <= 0) {
      const int error = got < 0 ? errno : EIO;
      if (error == EINTR) continue;
      return absl::UnavailableError(absl::StrCat(
          "cma_direct: reading ", bytes, " bytes of rank ", arena_.global_rank(r), "'s ", what,
          " buffer (pid ", arena_.pid(r), " on host ", HostName(),
          ") failed: ", std::strerror(error), error == ESRCH ? " (the process has exited)" : ""));
    }
    into += got;
    address += got;
    bytes -= got;
  }
  return absl::OkStatus();
}

absl::Status CmaDirect::ReduceChunk(size_t at, const std::byte* own, std::byte* out, size_t n) {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t bytes = n * args_.element_bytes();
  std::byte* staging = peers_.Scratch(kChunkBytes * (p - 1), kStagingScratch);
  int k = 0;
  sources_[k++] = own;
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    if (send_[j].mapped != nullptr) {
      sources_[k++] = send_[j].mapped + at;
      continue;
    }
    std::byte* into = staging + kChunkBytes * (k - 1);
    if (absl::Status s = ReadFrom(j, send_[j], at, into, bytes, "send"); !s.ok()) return s;
    sources_[k++] = into;
  }
  ReduceMany(args_.dtype, args_.op, out, sources_.data(), p, n);
  return absl::OkStatus();
}

absl::Status CmaDirect::AllReduce() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t es = args_.element_bytes(), chunk = kChunkBytes / es;
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  const Partition blocks(args_.count, p);
  auto chunks_of = [&](int j) { return (blocks.size(j) + chunk - 1) / chunk; };
  size_t most = 0;
  for (int j = 0; j < p; ++j) most = std::max(most, chunks_of(j));
  // Out of place, the peers' reduced chunks are copied out piece by piece into lines nothing
  // has touched this operation (see StreamsOutput).
  stream_out_ = send != recv && StreamsOutput(2 * p * args_.count * es);

  for (size_t k = 0; k < most; ++k) {
    if (k < chunks_of(me)) {
      const size_t first = blocks.offset(me) + k * chunk;
      const size_t n = std::min(chunk, blocks.offset(me) + blocks.size(me) - first);
      if (absl::Status s = ReduceChunk(first * es, send + first * es, recv + first * es, n);
          !s.ok()) {
        return s;
      }
      arena_.Publish(ArenaRounds::kChunks, ArenaRounds::ChunkMark(round_, k + 1));
    }
    for (int step = 1; step < p; ++step) {
      const int j = (me + step) % p;
      if (k >= chunks_of(j)) continue;
      if (absl::Status s =
              rounds_.WaitFor(j, ArenaRounds::kChunks, ArenaRounds::ChunkMark(round_, k + 1));
          !s.ok()) {
        return s;
      }
      const size_t first = blocks.offset(j) + k * chunk;
      const size_t n = std::min(chunk, blocks.offset(j) + blocks.size(j) - first);
      if (absl::Status s = ReadFrom(j, recv_[j], first * es, recv + first * es, n * es, "receive");
          !s.ok()) {
        return s;
      }
    }
  }
  rounds_.Finish(round_);
  if (stream_out_) StreamingCopyDone();
  return absl::OkStatus();
}

absl::Status CmaDirect::ReduceScatter() {
  const int me = arena_.local_rank();
  const size_t es = args_.element_bytes(), chunk = kChunkBytes / es, block = args_.count;
  const auto* send = static_cast<const std::byte*>(args_.send);
  auto* recv = static_cast<std::byte*>(args_.recv);
  for (size_t first = 0; first < block; first += chunk) {
    const size_t n = std::min(chunk, block - first);
    const size_t at = (me * block + first) * es;
    if (absl::Status s = ReduceChunk(at, send + at, recv + first * es, n); !s.ok()) return s;
  }
  rounds_.Finish(round_);
  return absl::OkStatus();
}

absl::Status CmaDirect::AllGather() {
  const int p = arena_.local_size(), me = arena_.local_rank();
  const size_t bytes = args_.count * args_.element_bytes();
  auto* recv = static_cast<std::byte*>(args_.recv);
  const bool in_place = args_.send == recv + me * bytes;
  // Out of place, every block lands in lines nothing has touched this operation.
  stream_out_ = !in_place && StreamsOutput((p + 1) * p * bytes);
  // The own block first: reading the peers' first and copying it while they return is no faster.
  if (!in_place) CopyOut(stream_out_, recv + me * bytes, args_.send, bytes);
  for (int step = 1; step < p; ++step) {
    const int j = (me + step) % p;
    if (absl::Status s = ReadFrom(j, send_[j], 0, recv + j * bytes, bytes, "send"); !s.ok()) {
      return s;
    }
  }
  rounds_.Finish(round_);
  if (stream_out_) StreamingCopyDone();
  return absl::OkStatus();
}

absl::Status CmaDirect::Broadcast() {
  // In the arena, local rank == rank: cma_direct runs only when every rank shares this host.
  const int root = args_.root;
  const size_t bytes = args_.count * args_.element_bytes();
  stream_out_ = args_.send != args_.recv && StreamsOutput((arena_.local_size() + 1) * bytes);
  if (arena_.local_rank() == root) {
    // The root reads nobody: the receivers may return while it copies its own output.
    rounds_.Finish(round_);
    if (args_.send != args_.recv) CopyOut(stream_out_, args_.recv, args_.send, bytes);
  } else {
    if (absl::Status s = ReadFrom(root, send_[root], 0, args_.recv, bytes, "send"); !s.ok()) {
      return s;
    }
    rounds_.Finish(round_);
  }
  if (stream_out_) StreamingCopyDone();
  return absl::OkStatus();
}

}  // namespace weft
