// PowerOfTwoFold: how the algorithms that pair ranks by the bits of their number (Rabenseifner,
// recursive doubling) run on a rank count that is not a power of two.
//
// With p = 2^k + r, the first 2r ranks pair up before the exchange: each even one hands its data
// to its odd neighbour, which reduces it in, and sits out; the 2^k that remain run the exchange
// under virtual ranks 0 .. 2^k - 1; at the end every odd neighbour returns the result. The fold
// costs two extra messages of the whole buffer on 2r ranks, the price of an exact power of two.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "algorithms/algorithm.h"
#include "peers.h"
#include "weft/kernels/dtype.h"

namespace weft {

class PowerOfTwoFold {
 public:
  PowerOfTwoFold(int rank, int ranks);

  int power() const { return power_; }  // largest power of two <= ranks
  // This rank's number in the exchange, or -1 for a rank that sits out.
  int virtual_rank() const { return virtual_rank_; }
  // The real rank of participant `virtual_rank` of the exchange.
  int RealRank(int virtual_rank) const;
  // The first of the real ranks participant `virtual_rank` stands for (two for a folded pair, one
  // otherwise); FirstRealRank(power()) is the rank count. Monotonic: a range of participants
  // stands for a contiguous range of real ranks, so of per-rank blocks.
  int FirstRealRank(int virtual_rank) const;
  // Whether this rank is one of a folded pair (it sits out, or stands in for its neighbour).
  bool paired() const { return rank_ < 2 * folded_; }

  // Step `step`: a rank that sits out sends `bytes` of its `input` to its neighbour, which writes
  // its own input reduced with them to its `data` (`input` may be `data`). Others do nothing.
  absl::Status Fold(Peers& peers, uint32_t step, const std::byte* input, std::byte* data,
                    size_t bytes, DataType dtype, ReduceOp op) const;
  // Step 0 of an all-reduce: `args`' input copied to its output, where the exchange works, and
  // folded there. The exchange's steps follow from 1.
  absl::Status FoldAllReduce(Peers& peers, const CollectiveArgs& args) const;
  // Step `step`: the neighbours return the result in `data` to the ranks that sat out.
  absl::Status Unfold(Peers& peers, uint32_t step, std::byte* data, size_t bytes) const;

 private:
  int rank_ = 0;
  int power_ = 1;
  int folded_ = 0;  // ranks - power_: ranks that hand their data to a neighbour
  int virtual_rank_ = -1;
};

}  // namespace weft
