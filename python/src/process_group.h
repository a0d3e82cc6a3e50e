// ProcessGroupWeft: a torch.distributed process group ("weft") over a weft::Communicator, for
// CPU tensors.
//
// Created through the framework's own c10d::Store (StoreAdapter, CreateWithStore): rank 0
// publishes a unique id under the group's key space, every rank creates the communicator. Every
// call checks its tensors, stages what Weft cannot use in place (a non-contiguous tensor goes
// through a contiguous copy, lists through one flat buffer), issues the Weft calls under one
// lock, and returns a WeftWork that copies the staged results back when it finishes. Calls
// complete in issue order, as Weft's do. Per-call timeouts in c10d's options are not used: every
// operation is bounded by the communicator's timeout (WEFT_TIMEOUT when set, else the group's).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "torch/csrc/distributed/c10d/ProcessGroup.hpp"
#include "torch/csrc/distributed/c10d/Store.hpp"
#include "weft/comm/communicator.h"
#include "work.h"

namespace weft::torch_backend {

class ProcessGroupWeft : public c10d::ProcessGroup {
 public:
  // Collective over the group's ranks; throws Weft's error when creation fails.
  static c10::intrusive_ptr<ProcessGroupWeft> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int size,
                                                     std::chrono::milliseconds timeout);
  explicit ProcessGroupWeft(std::unique_ptr<Communicator> comm);
  ~ProcessGroupWeft() override;

  const std::string getBackendName() const override { return "weft"; }
  // torch 1.13's batch_isend_irecv brackets its operations with these: a Weft group, so that the
  // transfers progress together whatever their order on each rank.
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Calls = absl::FunctionRef<std::vector<weft::Work>(Communicator&)>;
  // Makes the calls under issue_mu_ and wraps their Works; finishes at once what is done.
  c10::intrusive_ptr<c10d::Work> Issue(c10d::OpType type, Staged staged, Calls calls);

  std::mutex issue_mu_;  // every rank issues in one order, so calls from threads are serialized
  std::unique_ptr<Communicator> comm_;
  Completer completer_;  // declared after comm_: stopped, draining, before comm_ is destroyed
};

}  // namespace weft::torch_backend
