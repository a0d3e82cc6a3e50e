// reduce_perf: the root receives the reduction over ranks.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class Reduce final : public Collective {
 public:
  const char* name() const override { return "reduce"; }
  OpColumn op_column() const override { return OpColumn::kOperator; }
  bool reduces() const override { return true; }
  bool rooted() const override { return true; }
  const char* tuned_name() const override { return "reduce"; }

  Layout GetLayout(size_t count, size_t, int) const override {
    return {.send_count = count, .recv_count = count, .param_count = count};
  }
  double BusFactor(int) const override { return 1; }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int, int root) const override {
    if (rank != root) return {};
    return {{.recv_offset = 0, .count = layout.recv_count}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
           ReduceOp op, int root) const override {
    return comm.Reduce(send, recv, count, type, op, root);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Reduce collective;
  return collective;
}

}  // namespace weft::perf
