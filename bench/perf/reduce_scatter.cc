// reduce_scatter_perf: rank r receives the reduction of block r of every rank's send buffer.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class ReduceScatter final : public Collective {
 public:
  const char* name() const override { return "reduce_scatter"; }
  OpColumn op_column() const override { return OpColumn::kOperator; }
  bool reduces() const override { return true; }
  bool rooted() const override { return false; }
  const char* tuned_name() const override { return "reduce_scatter"; }

  Layout GetLayout(size_t count, size_t element_size, int ranks) const override {
    return ScatteredLayout(count, element_size, ranks);
  }
  double BusFactor(int ranks) const override { return OnePassBusFactor(ranks); }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int, int) const override {
    return {
        {.recv_offset = 0, .count = layout.recv_count, .source_index = rank * layout.recv_count}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
           ReduceOp op, int) const override {
    return comm.ReduceScatter(send, recv, count, type, op);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const ReduceScatter collective;
  return collective;
}

}  // namespace weft::perf
