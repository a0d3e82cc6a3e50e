// alltoall_perf: block j of rank r's send buffer lands in block r of rank j's receive buffer.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class AllToAll final : public Collective {
 public:
  const char* name() const override { return "alltoall"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  const char* tuned_name() const override { return "all_to_all"; }

  // In place, send and receive are the same buffer. nccl-tests leaves that result unchecked
  // (N/A); Weft defines it, so it is checked.
  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    const size_t block = PerRankCount(count, element_size, ranks);
    return {.send_count = block * ranks, .recv_count = block * ranks, .param_count = block};
  }
  double BusFactor(int ranks) const override { return OnePassBusFactor(ranks); }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int ranks, int) const override {
    std::vector<Block> blocks;
    for (int r = 0; r < ranks; ++r) {
      blocks.push_back({.recv_offset = r * layout.param_count,
                        .count = layout.param_count,
                        .source_rank = r,
                        .source_index = rank * layout.param_count});
    }
    return blocks;
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int) const override {
    return comm.AllToAll(send, recv, count, type);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const AllToAll collective;
  return collective;
}

}  // namespace weft::perf
