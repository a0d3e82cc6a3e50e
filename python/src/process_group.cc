#include "process_group.h"

#include <cstdlib>

#include "dtypes.h"
#include "staging.h"
#include "store_adapter.h"
#include "weft/comm/store_rendezvous.h"

namespace weft::torch_backend {
namespace {

// The root of a rooted collective: a rank of the group, and its only tensor.
int Root(int64_t root_rank, int64_t root_tensor, int size, const char* collective) {
  TORCH_CHECK(root_rank >= 0 && root_rank < size && root_tensor == 0, "weft: ", collective,
              ": invalid root rank ", root_rank, " or root tensor ", root_tensor);
  return static_cast<int>(root_rank);
}

}  // namespace

c10::intrusive_ptr<ProcessGroupWeft> ProcessGroupWeft::Create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  StoreAdapter adapter(store);
  CommOptions options;
  // WEFT_TIMEOUT, when set, wins over the group's timeout (CommOptions reads it when zero).
  if (std::getenv("WEFT_TIMEOUT") == nullptr) options.timeout = absl::FromChrono(timeout);
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateWithStore(adapter, "weft_torch_unique_id", rank, size, options);
  TORCH_CHECK(comm.ok(), "weft: creating the process group's communicator (rank ", rank, " of ",
              size, ") failed: ", comm.status().ToString());
  return c10::make_intrusive<ProcessGroupWeft>(*std::move(comm));
}

ProcessGroupWeft::ProcessGroupWeft(std::unique_ptr<Communicator> comm)
    : c10d::ProcessGroup(comm->rank(), comm->size()), comm_(std::move(comm)) {
  init();
}

ProcessGroupWeft::~ProcessGroupWeft() { completer_.Stop(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::Issue(c10d::OpType type, Staged staged,
                                                       Calls calls) {
  std::vector<weft::Work> works;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    works = calls(*comm_);
  }
  auto work = c10::make_intrusive<WeftWork>(rank_, type, std::move(works), std::move(staged));
  if (!work->FinishIfDone()) completer_.Add(work);
  return work;
}

void ProcessGroupWeft::startCoalescing() {
  std::lock_guard<std::mutex> lock(issue_mu_);
  comm_->GroupStart();
}

// The works issued inside hold Weft Works that finish with the group's.
void ProcessGroupWeft::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*works*/) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  (void)comm_->GroupEnd();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "broadcast");
  const int root = Root(opts.rootRank, opts.rootTensor, size_, "broadcast");
  Staged staged(tensors);
  const at::Tensor buffer = StageInOut(tensor, staged);
  const Elements e = Movable(buffer);
  return Issue(c10d::OpType::BROADCAST, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{
        comm.Broadcast(buffer.data_ptr(), buffer.data_ptr(), e.count, e.type, root)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "all_reduce");
  const ReduceOp op = ToWeftOp(opts.reduceOp, "all_reduce");
  Staged staged(tensors);
  const at::Tensor buffer = StageInOut(tensor, staged);
  const Elements e = Reducible(buffer, "all_reduce");
  return Issue(c10d::OpType::ALLREDUCE, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{
        comm.AllReduce(buffer.data_ptr(), buffer.data_ptr(), e.count, e.type, op)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const ReduceOp op = ToWeftOp(opts.reduceOp, "all_reduce_coalesced");
  Staged staged(tensors);
  std::vector<at::Tensor> buffers;
  for (const at::Tensor& tensor : tensors) {
    CheckCpu(tensor, "all_reduce_coalesced");
    (void)Reducible(tensor, "all_reduce_coalesced");
    buffers.push_back(StageInOut(tensor, staged));
  }
  return Issue(c10d::OpType::ALLREDUCE_COALESCED, std::move(staged), [&](Communicator& comm) {
    std::vector<weft::Work> works;
    for (const at::Tensor& buffer : buffers) {
      const Elements e = Reducible(buffer, "all_reduce_coalesced");
      works.push_back(comm.AllReduce(buffer.data_ptr(), buffer.data_ptr(), e.count, e.type, op));
    }
    return works;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "reduce");
  const int root = Root(opts.rootRank, opts.rootTensor, size_, "reduce");
  const ReduceOp op = ToWeftOp(opts.reduceOp, "reduce");
  Staged staged(tensors);
  const at::Tensor buffer = StageInOut(tensor, staged);
  const Elements e = Reducible(buffer, "reduce");
  return Issue(c10d::OpType::REDUCE, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{
        comm.Reduce(buffer.data_ptr(), buffer.data_ptr(), e.count, e.type, op, root)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  CheckBlocks(output, input, size_, "all_gather_into_tensor");
  Staged staged(std::vector<at::Tensor>{output});
  const at::Tensor in = StageIn(input, staged);
  const at::Tensor out = StageOut(output, staged);
  const Elements e = Movable(in);
  return Issue(c10d::OpType::_ALLGATHER_BASE, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.AllGather(in.data_ptr(), out.data_ptr(), e.count, e.type)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckBlocks(input, output, size_, "reduce_scatter_tensor");
  const ReduceOp op = ToWeftOp(opts.reduceOp, "reduce_scatter_tensor");
  Staged staged(std::vector<at::Tensor>{output});
  const at::Tensor in = StageIn(input, staged);
  const at::Tensor out = StageOut(output, staged);
  const Elements e = Reducible(out, "reduce_scatter_tensor");
  return Issue(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{
        comm.ReduceScatter(in.data_ptr(), out.data_ptr(), e.count, e.type, op)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst,
                                                      int tag) {
  const at::Tensor& tensor = Single(tensors, "send");
  Staged staged;
  const at::Tensor in = StageIn(tensor, staged);
  const Elements e = Movable(in);
  return Issue(c10d::OpType::SEND, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.Send(in.data_ptr(), e.count, e.type, dst, tag)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src,
                                                      int tag) {
  const at::Tensor& tensor = Single(tensors, "recv");
  Staged staged(tensors);
  const at::Tensor out = StageOut(tensor, staged);
  const Elements e = Movable(out);
  return Issue(c10d::OpType::RECV, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.Recv(out.data_ptr(), e.count, e.type, src, tag)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions& /*opts*/) {
  return Issue(c10d::OpType::BARRIER, Staged{},
               [&](Communicator& comm) { return std::vector<weft::Work>{comm.Barrier()}; });
}

}  // namespace weft::torch_backend
