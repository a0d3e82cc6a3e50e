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
  const char* tuned_name() const override { return "all_gather"; }

  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    return GatheredLayout(count, element_size, ranks);
  }
  double BusFactor(int ranks) const override { return OnePassBusFactor(ranks); }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int, int ranks, int) const override {
    return BlocksInRankOrder(layout.send_count, ranks);
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
