// sendrecv_perf: every rank sends to rank+1 and receives from rank-1, in one group.
#include <cstring>

#include "perf/collective.h"

namespace weft::perf {
namespace {

class SendRecv final : public Collective {
 public:
  const char* name() const override { return "sendrecv"; }
  // nccl-tests prints the operator (and loops over -o all) although nothing is reduced.
  OpColumn op_column() const override { return OpColumn::kOperator; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  // In place sends and receives through the same buffer at once: timed, not checked.
  bool checks_in_place() const override { return false; }
  bool grouped() const override { return true; }

  Layout GetLayout(size_t count, size_t, int) const override {
    return {.send_count = count, .recv_count = count, .param_count = count};
  }
  double BusFactor(int) const override { return 1; }

  size_t InputCount(const Layout& layout, int, int) const override { return layout.send_count; }
  std::vector<Block> Expected(const Layout& layout, int rank, int ranks, int) const override {
    return {
        {.recv_offset = 0, .count = layout.recv_count, .source_rank = (rank - 1 + ranks) % ranks}};
  }

  Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, ReduceOp,
           int) const override {
    const int rank = comm.rank(), ranks = comm.size();
    comm.GroupStart();
    if (ranks == 1) {
      // Weft has no transfer to oneself; the copy is what NCCL's self send/receive does.
      if (send != recv) std::memcpy(recv, send, count * SizeOf(type));
    } else if (count > 0) {
      comm.Send(send, count, type, (rank + 1) % ranks);
      comm.Recv(recv, count, type, (rank - 1 + ranks) % ranks);
    }
    return comm.GroupEnd();
  }
};

}  // namespace

const Collective& PerfCollective() {
  static const SendRecv collective;
  return collective;
}

}  // namespace weft::perf
