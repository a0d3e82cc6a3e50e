// all_reduce_perf: recv = op over ranks of send, on every rank.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class AllReduce final : public Collective {
 public:
  const char* name() const override { return "all_reduce"; }
  OpColumn op_column() const override { return OpColumn::kOperator; }
  bool reduces() const override { return true; }
  bool rooted() const override { return false; }
  const char* tuned_name() const override { return "all_reduce"; }

  Layout GetLayout(size_t count, size_t, int) const override {
    return {.send_count = count, .recv_count = count, .param_count = count};
  }
  // Each rank's data crosses its link 2(n-1)/n times in a ring: reduce-scatter then all-gather.
  double BusFactor(int ranks) const override { return 2.0 * (ranks - 1) / ranks; }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int, int, int) const override {
    return {{.recv_offset = 0, .count = layout.recv_count}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
           ReduceOp op, int) const override {
    return comm.AllReduce(send, recv, count, type, op);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const AllReduce collective;
  return collective;
}

}  // namespace weft::perf
