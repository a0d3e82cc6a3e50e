#include "algorithms/rabenseifner.h"

#include <cstring>

namespace weft {

RabenseifnerAllReduce::RabenseifnerAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {
  const int p = peers.size(), r = peers.rank();
  while (power_ * 2 <= p) power_ *= 2;
  folded_ = p - power_;
  if (r < 2 * folded_) {
    virtual_rank_ = (r % 2 == 1) ? r / 2 : -1;
  } else {
    virtual_rank_ = r - folded_;
  }
}

int RabenseifnerAllReduce::RealRank(int virtual_rank) const {
  return virtual_rank < folded_ ? virtual_rank * 2 + 1 : virtual_rank + folded_;
}

absl::Status RabenseifnerAllReduce::Run() {
  const int r = peers_.rank();
  const size_t es = args_.element_bytes();
  const size_t bytes = args_.count * es;
  auto* data = static_cast<std::byte*>(args_.recv);
  if (args_.send != args_.recv) std::memcpy(data, args_.send, bytes);
  if (peers_.size() == 1) return absl::OkStatus();
  uint32_t step = 0;

  // Fold the extra ranks into their odd neighbours.
  if (r < 2 * folded_) {
    if (virtual_rank_ < 0) {
      if (absl::Status s = peers_.Wait({peers_.Send(r + 1, step, data, bytes)}); !s.ok()) return s;
    } else {
      Transfer t = peers_.Recv(r - 1, step, RecvSink::Reduce(data, args_.dtype, args_.op), bytes);
      if (absl::Status s = peers_.Wait({t}); !s.ok()) return s;
    }
  }
  ++step;

  if (virtual_rank_ >= 0) {
    const Partition parts(args_.count, power_);
    auto at = [&](int part) { return data + parts.offset(part) * es; };
    auto span = [&](int lo, int hi) { return (parts.offset(hi) - parts.offset(lo)) * es; };
    // Recursive halving: keep the half of the current range that contains our own part.
    int lo = 0, hi = power_;
    for (int mask = power_ / 2; mask >= 1; mask /= 2, ++step) {
      const int partner = RealRank(virtual_rank_ ^ mask);
      const int mid = lo + (hi - lo) / 2;
      const bool keep_low = (virtual_rank_ & mask) == 0;
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
    for (int mask = 1; mask < power_; mask *= 2, ++step) {
      const int partner = RealRank(virtual_rank_ ^ mask);
      const int width = hi - lo;
      const bool we_are_low = (virtual_rank_ & mask) == 0;
      const int other_lo = we_are_low ? hi : lo - width;
      Transfer sent = peers_.Send(partner, step, at(lo), span(lo, hi));
      Transfer received = peers_.Recv(partner, step, RecvSink::Copy(at(other_lo)),
                                      span(other_lo, other_lo + width));
      if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
      lo = std::min(lo, other_lo);
      hi = lo + 2 * width;
    }
  } else {
    step += 2 * __builtin_ctz(static_cast<unsigned>(power_));
  }

  // Unfold: the odd neighbours return the result.
  if (r < 2 * folded_) {
    Transfer t = virtual_rank_ < 0 ? peers_.Recv(r + 1, step, RecvSink::Copy(data), bytes)
                                   : peers_.Send(r - 1, step, data, bytes);
    if (absl::Status s = peers_.Wait({t}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace weft
