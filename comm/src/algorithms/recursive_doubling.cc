#include "algorithms/recursive_doubling.h"

#include <cstring>

#include "weft/kernels/reduce.h"

namespace weft {

RecursiveDoublingAllReduce::RecursiveDoublingAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), fold_(peers.rank(), peers.size()) {}

absl::Status RecursiveDoublingAllReduce::Run() {
  const size_t bytes = args_.count * args_.element_bytes();
  auto* data = static_cast<std::byte*>(args_.recv);
  if (absl::Status s = fold_.FoldAllReduce(peers_, args_); !s.ok()) return s;
  uint32_t step = 1;
  const int power = fold_.power(), me = fold_.virtual_rank();
  if (me >= 0 && power > 1) {
    std::byte* scratch = peers_.Scratch(bytes);
    for (int mask = 1; mask < power; mask *= 2, ++step) {
      const int partner = fold_.RealRank(me ^ mask);
      if ((me & mask) == 0) {
        // The lower rank reduces the upper one's buffer into its own as it arrives, so its own
        // leaves as a copy.
        std::memcpy(scratch, data, bytes);
        Transfer sent = peers_.Send(partner, step, scratch, bytes);
        Transfer received =
            peers_.Recv(partner, step, RecvSink::Reduce(data, args_.dtype, args_.op), bytes);
        if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
      } else {
        Transfer sent = peers_.Send(partner, step, data, bytes);
        Transfer received = peers_.Recv(partner, step, RecvSink::Copy(scratch), bytes);
        if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
        Reduce(args_.dtype, args_.op, data, scratch, data, args_.count);
      }
    }
  } else {
    step += __builtin_ctz(static_cast<unsigned>(power));
  }
  return fold_.Unfold(peers_, step, data, bytes);
}

}  // namespace weft
