// broadcast_perf: every rank receives the root's buffer.
#include "perf/collective.h"

namespace weft::perf {
namespace {

class Broadcast final : public Collective {
 public:
  const char* name() const override { return "broadcast"; }
  OpColumn op_column() const override { return OpColumn::kNone; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  const char* tuned_name() const override { return "broadcast"; }

  Layout GetLayout(size_t count, size_t, int) const override {
    return {.send_count = count, .recv_count = count, .param_count = count};
  }
  double BusFactor(int) const override { return 1; }

  size_t InputCount(const Layout& layout, int rank, int root) const override {
    return rank == root ? layout.send_count : 0;
  }
  std::vector<Block> Expected(const Layout& layout, int, int, int root) const override {
    return {{.recv_offset = 0, .count = layout.recv_count, .source_rank = root}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int root) const override {
    return comm.Broadcast(send, recv, count, type, root);
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const Broadcast collective;
  return collective;
}

}  // namespace weft::perf
