#include "perf/root_blocks.h"

#include <cstring>

namespace weft::perf {

Work ExchangeRootBlocks(Communicator& comm, BlockFlow flow, const void* send, void* recv,
                        size_t count, DataType type, int root) {
  const bool to_root = flow == BlockFlow::kToRoot;
  const int rank = comm.rank(), ranks = comm.size();
  const size_t block_bytes = count * SizeOf(type);
  auto* in = static_cast<std::byte*>(recv);
  const auto* out = static_cast<const std::byte*>(send);
  comm.GroupStart();
  if (count > 0 && rank == root) {
    for (int r = 0; r < ranks; ++r) {
      if (r == root) continue;
      const size_t at = static_cast<size_t>(r) * block_bytes;
      if (to_root) {
        comm.Recv(in + at, count, type, r);
      } else {
        comm.Send(out + at, count, type, r);
      }
    }
    // The root's own block: a copy (Weft has no transfer to oneself), none in place.
    const size_t own = static_cast<size_t>(root) * block_bytes;
    std::byte* to = to_root ? in + own : in;
    const std::byte* from = to_root ? out : out + own;
    if (to != from) std::memcpy(to, from, block_bytes);
  } else if (count > 0) {
    if (to_root) {
      comm.Send(send, count, type, root);
    } else {
      comm.Recv(recv, count, type, root);
    }
  }
  return comm.GroupEnd();
}

}  // namespace weft::perf
