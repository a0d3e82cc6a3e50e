// scatter_perf: block r of the root's send buffer goes to rank r. Weft has no scatter call, so
// the root sends every block inside one group, as nccl-tests does with ncclSend/ncclRecv.
#include <cstring>

#include "perf/collective.h"

namespace weft::perf {
namespace {

class Scatter final : public Collective {
 public:
  const char* name() const override { return "scatter"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  bool grouped() const override { return true; }

  // The size is the root's whole send buffer; in place, each rank's block of it is its result.
  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    const size_t block = PerRankCount(count, element_size, ranks);
    return {.send_count = block * ranks,
            .recv_count = block,
            .param_count = block,
            .recv_in_place_offset = block};
  }
  double BusFactor(int ranks) const override { return static_cast<double>(ranks - 1) / ranks; }

  size_t InputCount(const Layout& layout, int rank, int root) const override {
    return rank == root ? layout.send_count : 0;
  }
  std::vector<Block> Expected(const Layout& layout, int rank, int, int root) const override {
    return {{.recv_offset = 0,
             .count = layout.recv_count,
             .source_rank = root,
             .source_index = rank * layout.recv_count}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int root) const override {
    const int rank = comm.rank(), ranks = comm.size();
    const size_t block_bytes = count * SizeOf(type);
    comm.GroupStart();
    if (count > 0 && rank == root) {
      const auto* blocks = static_cast<const std::byte*>(send);
      for (int r = 0; r < ranks; ++r) {
        if (r != root) comm.Send(blocks + r * block_bytes, count, type, r);
      }
      // The root's own block: a copy (Weft has no transfer to oneself), none in place.
      const std::byte* own = blocks + root * block_bytes;
      if (own != recv) std::memcpy(recv, own, block_bytes);
    } else if (count > 0) {
      comm.Recv(recv, count, type, root);
    }
    return comm.GroupEnd();
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Scatter collective;
  return collective;
}

}  // namespace weft::perf
