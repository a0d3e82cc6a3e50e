#include "algorithms/power_of_two_fold.h"

#include <cstring>

namespace weft {

PowerOfTwoFold::PowerOfTwoFold(int rank, int ranks) : rank_(rank) {
  while (power_ * 2 <= ranks) power_ *= 2;
  folded_ = ranks - power_;
  if (rank < 2 * folded_) {
    virtual_rank_ = (rank % 2 == 1) ? rank / 2 : -1;
  } else {
    virtual_rank_ = rank - folded_;
  }
}

int PowerOfTwoFold::RealRank(int virtual_rank) const {
  return virtual_rank < folded_ ? virtual_rank * 2 + 1 : virtual_rank + folded_;
}

int PowerOfTwoFold::FirstRealRank(int virtual_rank) const {
  return virtual_rank < folded_ ? virtual_rank * 2 : virtual_rank + folded_;
}

absl::Status PowerOfTwoFold::Fold(Peers& peers, uint32_t step, const std::byte* input,
                                  std::byte* data, size_t bytes, DataType dtype,
                                  ReduceOp op) const {
  if (!paired()) return absl::OkStatus();
  if (virtual_rank_ < 0) return peers.Wait({peers.Send(rank_ + 1, step, input, bytes)});
  return peers.Wait({peers.Recv(rank_ - 1, step, RecvSink::Reduce(data, dtype, op, input), bytes)});
}

absl::Status PowerOfTwoFold::FoldAllReduce(Peers& peers, const CollectiveArgs& args) const {
  const size_t bytes = args.count * args.element_bytes();
  auto* data = static_cast<std::byte*>(args.recv);
  if (args.send != args.recv) std::memcpy(data, args.send, bytes);
  return Fold(peers, 0, data, data, bytes, args.dtype, args.op);
}

absl::Status PowerOfTwoFold::Unfold(Peers& peers, uint32_t step, std::byte* data,
                                    size_t bytes) const {
  if (!paired()) return absl::OkStatus();
  return peers.Wait({virtual_rank_ < 0 ? peers.Recv(rank_ + 1, step, RecvSink::Copy(data), bytes)
                                       : peers.Send(rank_ - 1, step, data, bytes)});
}

}  // namespace weft
