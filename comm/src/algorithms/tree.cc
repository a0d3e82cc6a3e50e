#include "algorithms/tree.h"

#include <algorithm>
#include <cstring>

namespace weft {
namespace {

// Large enough to keep per-message overhead small, small enough to pipeline a few MiB.
constexpr size_t kChunkBytes = 512 << 10;

size_t ChunkElements(size_t element_bytes) {
  return std::max<size_t>(1, kChunkBytes / element_bytes);
}

}  // namespace

BinomialTree::BinomialTree(int rank, int size, int root) {
  const int v = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (v & mask) {
      parent = ((v - mask) + root) % size;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask >= 1; mask >>= 1) {
    if (v + mask < size) children.push_back((v + mask + root) % size);
  }
}

TreeBroadcast::TreeBroadcast(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), tree_(peers.rank(), peers.size(), args.root) {}

absl::Status TreeBroadcast::Run() {
  const size_t es = args_.element_bytes();
  auto* data = static_cast<std::byte*>(args_.recv);
  if (tree_.parent < 0 && args_.send != args_.recv) {
    std::memcpy(data, args_.send, args_.count * es);
  }
  const size_t chunk = ChunkElements(es);
  std::vector<Transfer> sends;
  uint32_t step = 0;
  for (size_t offset = 0; offset < args_.count; offset += chunk, ++step) {
    const size_t bytes = std::min(chunk, args_.count - offset) * es;
    std::byte* at = data + offset * es;
    if (tree_.parent >= 0) {
      if (absl::Status s =
              peers_.Wait({peers_.Recv(tree_.parent, step, RecvSink::Copy(at), bytes)});
          !s.ok()) {
        return s;
      }
    }
    for (int child : tree_.children) sends.push_back(peers_.Send(child, step, at, bytes));
  }
  return peers_.Wait(sends);
}

TreeReduce::TreeReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args), tree_(peers.rank(), peers.size(), args.root) {}

absl::Status TreeReduce::Run() {
  const size_t es = args_.element_bytes();
  const auto* send = static_cast<const std::byte*>(args_.send);
  // Partial results accumulate in the root's receive buffer, elsewhere in scratch; a leaf sends
  // its own data as it is.
  std::byte* accumulator = nullptr;
  if (tree_.parent < 0) {
    accumulator = static_cast<std::byte*>(args_.recv);
  } else if (!tree_.children.empty()) {
    accumulator = peers_.Scratch(args_.count * es);
  }
  const size_t chunk = ChunkElements(es);
  std::vector<Transfer> sends;
  uint32_t step = 0;
  for (size_t offset = 0; offset < args_.count; offset += chunk, ++step) {
    const size_t bytes = std::min(chunk, args_.count - offset) * es;
    const std::byte* mine = send + offset * es;
    if (accumulator == nullptr) {
      sends.push_back(peers_.Send(tree_.parent, step, mine, bytes));
      continue;
    }
    std::byte* at = accumulator + offset * es;
    if (at != mine) std::memcpy(at, mine, bytes);
    // Smallest subtree first: it is ready soonest.
    for (auto child = tree_.children.rbegin(); child != tree_.children.rend(); ++child) {
      Transfer t = peers_.Recv(*child, step, RecvSink::Reduce(at, args_.dtype, args_.op), bytes);
      if (absl::Status s = peers_.Wait({t}); !s.ok()) return s;
    }
    if (tree_.parent >= 0) sends.push_back(peers_.Send(tree_.parent, step, at, bytes));
  }
  return peers_.Wait(sends);
}

}  // namespace weft
