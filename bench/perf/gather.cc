// gather_perf: the root receives every rank's block, in rank order (a point-to-point group, see
// root_blocks.h).
#include "perf/collective.h"
#include "perf/root_blocks.h"

namespace weft::perf {
namespace {

class Gather final : public Collective {
 public:
  const char* name() const override { return "gather"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  bool grouped() const override { return true; }

  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    return GatheredLayout(count, element_size, ranks);
  }
  double BusFactor(int ranks) const override { return OnePassBusFactor(ranks); }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int ranks, int root) const override {
    if (rank != root) return {};
    return BlocksInRankOrder(layout.send_count, ranks);
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int root) const override {
    return ExchangeRootBlocks(comm, BlockFlow::kToRoot, send, recv, count, type, root);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Gather collective;
  return collective;
}

}  // namespace weft::perf
