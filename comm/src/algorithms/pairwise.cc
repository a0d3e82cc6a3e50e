#include "algorithms/pairwise.h"

#include <cstdint>
#include <cstring>

namespace weft {

PairwiseAllToAll::PairwiseAllToAll(Peers& peers, const CollectiveArgs& args)
    : peers_(peers),
      args_(args),
      send_blocks_(Segments::PerRank(args, peers.size(), /*send_side=*/true)),
      recv_blocks_(Segments::PerRank(args, peers.size(), /*send_side=*/false)) {}

absl::Status PairwiseAllToAll::Run() {
  const int p = peers_.size(), r = peers_.rank();
  auto* recv = static_cast<std::byte*>(args_.recv);
  const auto* send = static_cast<const std::byte*>(args_.send);
  const size_t send_extent = send_blocks_.extent(), recv_extent = recv_blocks_.extent();
  const auto from_addr = reinterpret_cast<uintptr_t>(send);
  const auto to_addr = reinterpret_cast<uintptr_t>(recv);
  if (send_extent > 0 && recv_extent > 0 && from_addr < to_addr + recv_extent &&
      to_addr < from_addr + send_extent) {
    // In place: received blocks overwrite blocks still to be sent, so send from a copy.
    std::byte* copy = peers_.Scratch(send_extent);
    std::memcpy(copy, send, send_extent);
    send = copy;
  }
  if (recv_blocks_.bytes[r] > 0) {
    std::memcpy(recv + recv_blocks_.offset[r], send + send_blocks_.offset[r],
                recv_blocks_.bytes[r]);
  }
  for (int s = 1; s < p; ++s) {
    const int to = (r + s) % p, from = (r - s + p) % p;
    Transfer sent = peers_.Send(to, s, send + send_blocks_.offset[to], send_blocks_.bytes[to]);
    Transfer received = peers_.Recv(from, s, RecvSink::Copy(recv + recv_blocks_.offset[from]),
                                    recv_blocks_.bytes[from]);
    if (absl::Status st = peers_.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace weft
