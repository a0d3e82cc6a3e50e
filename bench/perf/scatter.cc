// scatter_perf: block r of the root's send buffer goes to rank r (a point-to-point group, see
// root_blocks.h).
#include "perf/collective.h"
#include "perf/root_blocks.h"

namespace weft::perf {
namespace {

class Scatter final : public Collective {
 public:
  const char* name() const override { return "scatter"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  bool grouped() const override { return true; }

  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    return ScatteredLayout(count, element_size, ranks);
  }
  double BusFactor(int ranks) const override { return OnePassBusFactor(ranks); }

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
    return ExchangeRootBlocks(comm, BlockFlow::kFromRoot, send, recv, count, type, root);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Scatter collective;
  return collective;
}

}  // namespace weft::perf
