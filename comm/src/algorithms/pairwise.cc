#include "algorithms/pairwise.h"

#include <cstring>

namespace weft {

PairwiseAllToAll::PairwiseAllToAll(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status PairwiseAllToAll::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const size_t block = args_.count * args_.element_bytes();
  auto* recv = static_cast<std::byte*>(args_.recv);
  const auto* send = static_cast<const std::byte*>(args_.send);
  if (send == recv) {
    // In place: received blocks overwrite blocks still to be sent, so send from a copy.
    std::byte* copy = peers_.Scratch(block * p);
    std::memcpy(copy, send, block * p);
    send = copy;
  }
  std::memcpy(recv + r * block, send + r * block, block);
  for (int s = 1; s < p; ++s) {
    const int to = (r + s) % p, from = (r - s + p) % p;
    Transfer sent = peers_.Send(to, s, send + to * block, block);
    Transfer received = peers_.Recv(from, s, RecvSink::Copy(recv + from * block), block);
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace weft
