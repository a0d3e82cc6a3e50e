#include "algorithms/rabenseifner.h"

#include <algorithm>
#include <cstring>

namespace weft {
namespace {

// The exchange splits a buffer into fold.power() parts, part k at byte offset(k) up to
// offset(k + 1). A step pairs the participants whose numbers differ in one bit (its mask) and
// splits or joins along it. Taking the high bits first, participant v ends the halving with part
// v, as a reduce-scatter must. Taking the low bits first, it ends with part bit-reverse(v), and the
// halving's first steps, which move the most data, pair the nearest ranks: over ranks numbered
// node by node, partners on one node, so that only the smaller later steps cross the network.

int Log2(int power) { return __builtin_ctz(static_cast<unsigned>(power)); }

// `index` with its log2(power) bits in reverse order; its own inverse.
int BitReverse(int index, int power) {
  int reversed = 0;
  for (int bit = 1; bit < power; bit <<= 1) reversed = (reversed << 1) | ((index & bit) ? 1 : 0);
  return reversed;
}

// Whether the reduce-scatter and the all-gather take the low bits first, so that only their
// smallest step crosses the network: over several nodes, without a fold. They then work on a copy
// that holds block BitReverse(j) at position j, where participant v's part is block v, and pay
// one local copy of the buffer for halving the bytes that cross.
bool LowBitsFirst(const Peers& peers, const PowerOfTwoFold& fold) {
  return peers.nodes().num_nodes() > 1 && fold.power() == peers.size();
}

// Copies the `parts` blocks of `from` to `to` in bit-reversed order.
void PermuteBlocks(const std::byte* from, std::byte* to, int parts, size_t block) {
  for (int j = 0; j < parts; ++j) {
    std::memcpy(to + j * block, from + BitReverse(j, parts) * block, block);
  }
}

// The masks of a halving in order: low bits first or high bits first. A doubling takes them in
// the reverse order.
int HalvingMask(int power, int index, bool low_bits_first) {
  return low_bits_first ? 1 << index : power >> (index + 1);
}

// Recursive halving: each participant keeps the half of its range that its bit selects and
// reduces the partner's contribution to it in, until it holds one part of `data` reduced, *part.
// The first step reads `input` (which may be `data`), so an out-of-place call copies nothing: the
// half it keeps is written as input + received, and later steps work inside that half.
template <typename Offset>
absl::Status Halve(Peers& peers, const PowerOfTwoFold& fold, const std::byte* input,
                   std::byte* data, Offset offset, DataType dtype, ReduceOp op, bool low_bits_first,
                   uint32_t* step, int* part) {
  const int me = fold.virtual_rank();
  int lo = 0, hi = fold.power();
  for (int i = 0; i < Log2(fold.power()); ++i, ++*step) {
    const int mask = HalvingMask(fold.power(), i, low_bits_first);
    const int partner = fold.RealRank(me ^ mask);
    const int mid = lo + (hi - lo) / 2;
    const bool keep_low = (me & mask) == 0;
    const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
    const int give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
    const std::byte* from = i == 0 ? input : data;
    Transfer sent =
        peers.Send(partner, *step, from + offset(give_lo), offset(give_hi) - offset(give_lo));
    Transfer received = peers.Recv(
        partner, *step, RecvSink::Reduce(data + offset(keep_lo), dtype, op, from + offset(keep_lo)),
        offset(keep_hi) - offset(keep_lo));
    if (absl::Status s = peers.Wait({sent, received}); !s.ok()) return s;
    lo = keep_lo;
    hi = keep_hi;
  }
  *part = lo;
  return absl::OkStatus();
}

// Recursive doubling, the halving's steps undone in reverse: from part `part`, each participant
// exchanges everything it holds with the partner, doubling it, until it holds every part.
template <typename Offset>
absl::Status Double(Peers& peers, const PowerOfTwoFold& fold, std::byte* data, Offset offset,
                    bool low_bits_first, int part, uint32_t* step) {
  const int me = fold.virtual_rank();
  const int steps = Log2(fold.power());
  int lo = part, hi = part + 1;
  for (int i = steps - 1; i >= 0; --i, ++*step) {
    const int mask = HalvingMask(fold.power(), i, low_bits_first);
    const int partner = fold.RealRank(me ^ mask);
    const int width = hi - lo;
    const int other_lo = (me & mask) == 0 ? hi : lo - width;
    Transfer sent = peers.Send(partner, *step, data + offset(lo), offset(hi) - offset(lo));
    Transfer received = peers.Recv(partner, *step, RecvSink::Copy(data + offset(other_lo)),
                                   offset(other_lo + width) - offset(other_lo));
    if (absl::Status s = peers.Wait({sent, received}); !s.ok()) return s;
    lo = std::min(lo, other_lo);
    hi = lo + 2 * width;
  }
  return absl::OkStatus();
}

}  // namespace

RabenseifnerAllReduce::RabenseifnerAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), fold_(peers.rank(), peers.size()) {}

absl::Status RabenseifnerAllReduce::Run() {
  const size_t es = args_.element_bytes();
  const size_t bytes = args_.count * es;
  auto* data = static_cast<std::byte*>(args_.recv);
  const auto* input = static_cast<const std::byte*>(args_.send);
  if (peers_.size() == 1) {
    if (input != data) std::memcpy(data, input, bytes);
    return absl::OkStatus();
  }
  if (absl::Status s = fold_.Fold(peers_, 0, input, data, bytes, args_.dtype, args_.op); !s.ok()) {
    return s;
  }
  uint32_t step = 1;
  if (fold_.virtual_rank() >= 0) {
    const Partition parts(args_.count, fold_.power());
    auto offset = [&](int part) { return parts.offset(part) * es; };
    int part = 0;
    // The halving's every part is written, and the doubling fills the rest.
    if (absl::Status s = Halve(peers_, fold_, fold_.paired() ? data : input, data, offset,
                               args_.dtype, args_.op, /*low_bits_first=*/true, &step, &part);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Double(peers_, fold_, data, offset, /*low_bits_first=*/true, part, &step);
        !s.ok()) {
      return s;
    }
  } else {
    step += 2 * Log2(fold_.power());
  }
  return fold_.Unfold(peers_, step, data, bytes);
}

RabenseifnerReduceScatter::RabenseifnerReduceScatter(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), fold_(peers.rank(), peers.size()) {}

absl::Status RabenseifnerReduceScatter::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  auto* out = static_cast<std::byte*>(args_.recv);
  if (p == 1) {
    if (args_.send != args_.recv) std::memcpy(out, args_.send, block);
    return absl::OkStatus();
  }
  // The caller's input must stay as it was: the partial sums accumulate in scratch.
  const auto* input = static_cast<const std::byte*>(args_.send);
  std::byte* work = peers_.Scratch(block * p);
  const bool low_bits_first = LowBitsFirst(peers_, fold_);
  if (low_bits_first) PermuteBlocks(input, work, p, block);
  uint32_t step = 0;
  if (absl::Status s = fold_.Fold(peers_, step++, input, work, block * p, args_.dtype, args_.op);
      !s.ok()) {
    return s;
  }
  int part = 0;
  if (fold_.virtual_rank() >= 0) {
    auto offset = [&](int k) { return fold_.FirstRealRank(k) * block; };
    if (absl::Status s = Halve(peers_, fold_, fold_.paired() || low_bits_first ? work : input, work,
                               offset, args_.dtype, args_.op, low_bits_first, &step, &part);
        !s.ok()) {
      return s;
    }
  } else {
    step += Log2(fold_.power());
  }
  // A folded pair's survivor holds both ranks' blocks; it hands its neighbour its own.
  if (fold_.paired()) {
    Transfer t = fold_.virtual_rank() < 0 ? peers_.Recv(r + 1, step, RecvSink::Copy(out), block)
                                          : peers_.Send(r - 1, step, work + (r - 1) * block, block);
    if (absl::Status s = peers_.Wait({t}); !s.ok()) return s;
  }
  if (fold_.virtual_rank() >= 0) {
    std::memcpy(out, work + (low_bits_first ? part : r) * block, block);
  }
  return absl::OkStatus();
}

RabenseifnerAllGather::RabenseifnerAllGather(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), fold_(peers.rank(), peers.size()) {}

absl::Status RabenseifnerAllGather::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  auto* out = static_cast<std::byte*>(args_.recv);
  if (LowBitsFirst(peers_, fold_)) {
    // The own block goes straight into the bit-reversed copy; step 0 belongs to the fold.
    std::byte* work = peers_.Scratch(block * p);
    auto offset = [&](int k) { return k * block; };
    const int part = BitReverse(r, p);
    std::memcpy(work + part * block, args_.send, block);
    uint32_t step = 1;
    if (absl::Status s = Double(peers_, fold_, work, offset, /*low_bits_first=*/true, part, &step);
        !s.ok()) {
      return s;
    }
    PermuteBlocks(work, out, p, block);
    return absl::OkStatus();
  }
  if (args_.send != out + r * block) std::memcpy(out + r * block, args_.send, block);
  if (p == 1) return absl::OkStatus();
  uint32_t step = 0;
  // A folded pair's survivor gathers for both: its neighbour's block first.
  if (fold_.paired()) {
    Transfer t = fold_.virtual_rank() < 0
                     ? peers_.Send(r + 1, step, out + r * block, block)
                     : peers_.Recv(r - 1, step, RecvSink::Copy(out + (r - 1) * block), block);
    if (absl::Status s = peers_.Wait({t}); !s.ok()) return s;
  }
  ++step;
  if (fold_.virtual_rank() >= 0) {
    auto offset = [&](int part) { return fold_.FirstRealRank(part) * block; };
    if (absl::Status s = Double(peers_, fold_, out, offset, /*low_bits_first=*/false,
                                fold_.virtual_rank(), &step);
        !s.ok()) {
      return s;
    }
  } else {
    step += Log2(fold_.power());
  }
  return fold_.Unfold(peers_, step, out, block * p);
}

}  // namespace weft
