// The list forms and all_to_all of ProcessGroupWeft: equal pieces go through the plain Weft
// collectives over one flat buffer; unequal ones through the V collectives.
#include <algorithm>
#include <functional>
#include <vector>

#include "dtypes.h"
#include "process_group.h"
#include "staging.h"

namespace weft::torch_backend {
namespace {

void CheckDtypes(const std::vector<at::Tensor>& tensors, c10::ScalarType type,
                 const char* collective) {
  for (const at::Tensor& tensor : tensors) {
    CheckCpu(tensor, collective);
    TORCH_CHECK(tensor.scalar_type() == type, "weft: ", collective, ": dtype ",
                tensor.scalar_type(), " differs from ", type);
  }
}

bool AllNumel(const std::vector<at::Tensor>& tensors, int64_t numel) {
  return std::all_of(tensors.begin(), tensors.end(),
                     [&](const at::Tensor& tensor) { return tensor.numel() == numel; });
}

// Counts of a tensor's dim-0 pieces (`splits` rows each; equal pieces when empty) in Weft's
// counting of `like`'s elements.
std::vector<size_t> SplitCounts(const at::Tensor& tensor, const std::vector<int64_t>& splits,
                                int size, const char* side) {
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const int64_t row = rows == 0 ? 0 : tensor.numel() / rows;
  std::vector<size_t> counts;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "weft: all_to_all_single: the ", side, " tensor's ", rows,
                " rows do not split evenly over ", size, " ranks");
    counts.assign(size, CountOf(tensor, rows / size * row));
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "weft: all_to_all_single: ", side,
              " split sizes name ", splits.size(), " ranks, the group has ", size);
  int64_t total = 0;
  for (const int64_t split : splits) {
    TORCH_CHECK(split >= 0, "weft: all_to_all_single: negative ", side, " split size ", split);
    total += split;
    counts.push_back(CountOf(tensor, split * row));
  }
  TORCH_CHECK(total == rows, "weft: all_to_all_single: ", side, " split sizes add up to ", total,
              ", the tensor has ", rows, " rows");
  return counts;
}

bool Equal(const std::vector<size_t>& counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

// Each tensor's element count in Weft's counting (Movable's: bytes where Weft lacks the dtype).
std::vector<size_t> Counts(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> counts;
  for (const at::Tensor& tensor : tensors) counts.push_back(CountOf(tensor, tensor.numel()));
  return counts;
}

// Where each block starts when the blocks lie back to back.
std::vector<size_t> Displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const at::Tensor& input = Single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "weft: all_gather takes one list of ", size_, " output tensors");
  const std::vector<at::Tensor>& outs = outputs[0];
  CheckDtypes(outs, input.scalar_type(), "all_gather");
  TORCH_CHECK(outs[rank_].numel() == input.numel(), "weft: all_gather: output ", rank_, " has ",
              outs[rank_].numel(), " elements, this rank's input ", input.numel());
  Staged staged(outs);
  const at::Tensor in = StageIn(input, staged);
  const at::Tensor flat = FlattenOut(outs, staged);
  const Elements e = Movable(in);
  if (AllNumel(outs, input.numel())) {
    return Issue(c10d::OpType::ALLGATHER, std::move(staged), [&](Communicator& comm) {
      return std::vector<weft::Work>{
          comm.AllGather(in.data_ptr(), flat.data_ptr(), e.count, e.type)};
    });
  }
  const std::vector<size_t> counts = Counts(outs);
  return Issue(c10d::OpType::ALLGATHER, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.AllGatherV(in.data_ptr(), e.count, flat.data_ptr(), counts,
                                                   Displacements(counts), e.type)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = Single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "weft: reduce_scatter takes one list of ", size_, " input tensors");
  const std::vector<at::Tensor>& ins = inputs[0];
  CheckDtypes(ins, output.scalar_type(), "reduce_scatter");
  TORCH_CHECK(ins[rank_].numel() == output.numel(), "weft: reduce_scatter: input ", rank_, " has ",
              ins[rank_].numel(), " elements, the output ", output.numel());
  const ReduceOp op = ToWeftOp(opts.reduceOp, "reduce_scatter");
  Staged staged(outputs);
  const at::Tensor flat = FlattenIn(ins, staged);
  const at::Tensor out = StageOut(output, staged);
  const Elements e = Reducible(out, "reduce_scatter");
  if (AllNumel(ins, output.numel())) {
    return Issue(c10d::OpType::REDUCE_SCATTER, std::move(staged), [&](Communicator& comm) {
      return std::vector<weft::Work>{
          comm.ReduceScatter(flat.data_ptr(), out.data_ptr(), e.count, e.type, op)};
    });
  }
  const std::vector<size_t> counts = Counts(ins);
  return Issue(c10d::OpType::REDUCE_SCATTER, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{
        comm.ReduceScatterV(flat.data_ptr(), out.data_ptr(), counts, e.type, op)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /*opts*/) {
  CheckCpu(output, "all_to_all_single");
  CheckCpu(input, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft: all_to_all_single: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  const std::vector<size_t> send_counts = SplitCounts(input, input_splits, size_, "input");
  const std::vector<size_t> recv_counts = SplitCounts(output, output_splits, size_, "output");
  Staged staged(std::vector<at::Tensor>{output});
  const at::Tensor in = StageIn(input, staged);
  const at::Tensor out = StageOut(output, staged);
  const Elements e = Movable(in);
  if (Equal(send_counts) && send_counts == recv_counts) {
    return Issue(c10d::OpType::ALLTOALL_BASE, std::move(staged), [&](Communicator& comm) {
      return std::vector<weft::Work>{
          comm.AllToAll(in.data_ptr(), out.data_ptr(), send_counts[0], e.type)};
    });
  }
  return Issue(c10d::OpType::ALLTOALL_BASE, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.AllToAllV(in.data_ptr(), send_counts,
                                                  Displacements(send_counts), out.data_ptr(),
                                                  recv_counts, Displacements(recv_counts), e.type)};
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "weft: all_to_all takes ", size_, " input and ", size_, " output tensors");
  CheckDtypes(inputs, inputs[0].scalar_type(), "all_to_all");
  CheckDtypes(outputs, inputs[0].scalar_type(), "all_to_all");
  Staged staged(outputs);
  const at::Tensor flat_in = FlattenIn(inputs, staged);
  const at::Tensor flat_out = FlattenOut(outputs, staged);
  const Elements e = Movable(inputs[0]);
  if (AllNumel(inputs, inputs[0].numel()) && AllNumel(outputs, inputs[0].numel())) {
    return Issue(c10d::OpType::ALLTOALL, std::move(staged), [&](Communicator& comm) {
      return std::vector<weft::Work>{
          comm.AllToAll(flat_in.data_ptr(), flat_out.data_ptr(), e.count, e.type)};
    });
  }
  const std::vector<size_t> send_counts = Counts(inputs);
  const std::vector<size_t> recv_counts = Counts(outputs);
  return Issue(c10d::OpType::ALLTOALL, std::move(staged), [&](Communicator& comm) {
    return std::vector<weft::Work>{comm.AllToAllV(flat_in.data_ptr(), send_counts,
                                                  Displacements(send_counts), flat_out.data_ptr(),
                                                  recv_counts, Displacements(recv_counts), e.type)};
  });
}

}  // namespace weft::torch_backend
