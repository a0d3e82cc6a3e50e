// all_gather_perf: every rank receives every rank's block, in rank order.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class AllGather final : public Collective {
 public:
  const char* name() const override { return "all_gather"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }

  // The size is the whole receive buffer; in place, each rank sends its block of it.
  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    const size_t block = PerRankCount(count, element_size, ranks);
    return {.send_count = block,
            .recv_count = block * ranks,
            .param_count = block,
            .send_in_place_offset = block};
  }
  double BusFactor(int ranks) const override { return static_cast<double>(ranks - 1) / ranks; }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int, int ranks, int) const override {
    std::vector<Block> blocks;
    for (int r = 0; r < ranks; ++r) {
      blocks.push_back(
          {.recv_offset = r * layout.send_count, .count = layout.send_count, .source_rank = r});
    }
    return blocks;
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int) const override {
    return comm.AllGather(send, recv, count, type);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const AllGather collective;
  return collective;
}

}  // namespace weft::perf
