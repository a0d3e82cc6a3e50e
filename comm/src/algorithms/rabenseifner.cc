#include "algorithms/rabenseifner.h"

#include <algorithm>
#include <cstring>

namespace weft {

RabenseifnerAllReduce::RabenseifnerAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), fold_(peers.rank(), peers.size()) {}

absl::Status RabenseifnerAllReduce::Run() {
  const size_t es = args_.element_bytes();
  const size_t bytes = args_.count * es;
  auto* data = static_cast<std::byte*>(args_.recv);
  if (args_.send != args_.recv) std::memcpy(data, args_.send, bytes);
  if (peers_.size() == 1) return absl::OkStatus();
  uint32_t step = 0;
  if (absl::Status s = fold_.Fold(peers_, step++, data, bytes, args_.dtype, args_.op); !s.ok()) {
    return s;
  }

  const int power = fold_.power(), me = fold_.virtual_rank();
  if (me >= 0) {
    const Partition parts(args_.count, power);
    auto at = [&](int part) { return data + parts.offset(part) * es; };
    auto span = [&](int lo, int hi) { return (parts.offset(hi) - parts.offset(lo)) * es; };
    // Recursive halving: keep the half of the current range that contains our own part.
    int lo = 0, hi = power;
    for (int mask = power / 2; mask >= 1; mask /= 2, ++step) {
      const int partner = fold_.RealRank(me ^ mask);
      const int mid = lo + (hi - lo) / 2;
      const bool keep_low = (me & mask) == 0;
      const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
      const int give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
      Transfer sent = peers_.Send(partner, step, at(give_lo), span(give_lo, give_hi));
      Transfer received =
          peers_.Recv(partner, step, RecvSink::Reduce(at(keep_lo), args_.dtype, args_.op),
                      span(keep_lo, keep_hi));
      if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
      lo = keep_lo;
      hi = keep_hi;
    }
    // Recursive doubling: exchange complete ranges, doubling what each rank holds.
    for (int mask = 1; mask < power; mask *= 2, ++step) {
      const int partner = fold_.RealRank(me ^ mask);
      const int width = hi - lo;
      const bool we_are_low = (me & mask) == 0;
      const int other_lo = we_are_low ? hi : lo - width;
      Transfer sent = peers_.Send(partner, step, at(lo), span(lo, hi));
      Transfer received = peers_.Recv(partner, step, RecvSink::Copy(at(other_lo)),
                                      span(other_lo, other_lo + width));
      if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
      lo = std::min(lo, other_lo);
      hi = lo + 2 * width;
    }
  } else {
    step += 2 * __builtin_ctz(static_cast<unsigned>(power));
  }
  return fold_.Unfold(peers_, step, data, bytes);
}

}  // namespace weft
