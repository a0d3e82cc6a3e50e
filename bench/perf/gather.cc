// gather_perf: the root receives every rank's block, in rank order. Weft has no gather call, so
// the root receives every block inside one group, as nccl-tests does with ncclSend/ncclRecv.
#include <cstring>

#include "perf/collective.h"

namespace weft::perf {
namespace {

class Gather final : public Collective {
 public:
  const char* name() const override { return "gather"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  bool grouped() const override { return true; }

  // The size is the root's whole receive buffer; in place, each rank sends its block of it.
  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    const size_t block = PerRankCount(count, element_size, ranks);
    return {.send_count = block,
            .recv_count = block * ranks,
            .param_count = block,
            .send_in_place_offset = block};
  }
  double BusFactor(int ranks) const override { return static_cast<double>(ranks - 1) / ranks; }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int ranks, int root) const override {
    std::vector<Block> blocks;
    if (rank != root) return blocks;
    for (int r = 0; r < ranks; ++r) {
      blocks.push_back(
          {.recv_offset = r * layout.send_count, .count = layout.send_count, .source_rank = r});
    }
    return blocks;
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int root) const override {
    const int rank = comm.rank(), ranks = comm.size();
    const size_t block_bytes = count * SizeOf(type);
    comm.GroupStart();
    if (count > 0 && rank == root) {
      auto* blocks = static_cast<std::byte*>(recv);
      for (int r = 0; r < ranks; ++r) {
        if (r != root) comm.Recv(blocks + r * block_bytes, count, type, r);
      }
      // The root's own block: a copy (Weft has no transfer to oneself), none in place.
      std::byte* own = blocks + root * block_bytes;
      if (own != send) std::memcpy(own, send, block_bytes);
    } else if (count > 0) {
      comm.Send(send, count, type, root);
    }
    return comm.GroupEnd();
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Gather collective;
  return collective;
}

}  // namespace weft::perf
