#include "algorithms/ring.h"

#include <cstring>

namespace weft {
namespace {

int Mod(int a, int p) { return ((a % p) + p) % p; }

}  // namespace

RingAllReduce::RingAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), segments_(args.count, peers.size()) {}

absl::Status RingAllReduce::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t es = args_.element_bytes();
  auto* data = static_cast<std::byte*>(args_.recv);
  if (args_.send != args_.recv) std::memcpy(data, args_.send, args_.count * es);
  if (p == 1) return absl::OkStatus();
  const int right = Mod(r + 1, p), left = Mod(r - 1, p);
  auto at = [&](int segment) { return data + segments_.offset(segment) * es; };
  auto bytes = [&](int segment) { return segments_.size(segment) * es; };

  // Reduce-scatter: after step s, segment r-s-1 holds the sum over ranks r-s-1 .. r.
  for (int s = 0; s < p - 1; ++s) {
    const int out = Mod(r - s, p), in = Mod(r - s - 1, p);
    Transfer sent = peers_.Send(right, s, at(out), bytes(out));
    Transfer received =
        peers_.Recv(left, s, RecvSink::Reduce(at(in), args_.dtype, args_.op), bytes(in));
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  // All-gather: rank r now owns the complete segment r+1 and passes complete segments on.
  for (int s = 0; s < p - 1; ++s) {
    const int out = Mod(r + 1 - s, p), in = Mod(r - s, p);
    Transfer sent = peers_.Send(right, p - 1 + s, at(out), bytes(out));
    Transfer received = peers_.Recv(left, p - 1 + s, RecvSink::Copy(at(in)), bytes(in));
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

RingReduceScatter::RingReduceScatter(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status RingReduceScatter::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t es = args_.element_bytes();
  const size_t block = args_.count * es;
  const auto* send = static_cast<const std::byte*>(args_.send);
  if (p == 1) {
    if (args_.send != args_.recv) std::memcpy(args_.recv, send, block);
    return absl::OkStatus();
  }
  // The partial sums accumulate in scratch: the caller's send buffer is read-only.
  std::byte* work = peers_.Scratch(block * p);
  std::memcpy(work, send, block * p);
  const int right = Mod(r + 1, p), left = Mod(r - 1, p);
  // After step s, block r-s-2 holds the sum over ranks r-s-2 .. r; the last step completes r.
  for (int s = 0; s < p - 1; ++s) {
    const int out = Mod(r - s - 1, p), in = Mod(r - s - 2, p);
    Transfer sent = peers_.Send(right, s, work + out * block, block);
    Transfer received =
        peers_.Recv(left, s, RecvSink::Reduce(work + in * block, args_.dtype, args_.op), block);
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  std::memcpy(args_.recv, work + r * block, block);
  return absl::OkStatus();
}

RingAllGather::RingAllGather(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status RingAllGather::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  auto* data = static_cast<std::byte*>(args_.recv);
  if (args_.send != data + r * block) std::memcpy(data + r * block, args_.send, block);
  const int right = Mod(r + 1, p), left = Mod(r - 1, p);
  for (int s = 0; s < p - 1; ++s) {
    const int out = Mod(r - s, p), in = Mod(r - s - 1, p);
    Transfer sent = peers_.Send(right, s, data + out * block, block);
    Transfer received = peers_.Recv(left, s, RecvSink::Copy(data + in * block), block);
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace weft
