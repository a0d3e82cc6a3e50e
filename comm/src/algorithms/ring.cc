#include "algorithms/ring.h"

#include <algorithm>
#include <cstring>

namespace weft {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// A block may be empty, and then its buffer may be null.
void CopyBlock(void* to, const void* from, size_t bytes) {
  if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

}  // namespace

RankGroup RankGroup::Whole(const Peers& peers) {
  RankGroup group;
  group.me = peers.rank();
  for (int r = 0; r < peers.size(); ++r) group.ranks.push_back(r);
  return group;
}

Segments Segments::Even(size_t count, int parts, size_t element_bytes, size_t base) {
  const Partition partition(count, parts);
  Segments segments;
  segments.offset.reserve(parts);
  segments.bytes.reserve(parts);
  for (int i = 0; i < parts; ++i) {
    segments.offset.push_back(base + partition.offset(i) * element_bytes);
    segments.bytes.push_back(partition.size(i) * element_bytes);
  }
  return segments;
}

Segments Segments::Blocks(const std::vector<size_t>& counts, const std::vector<size_t>& displs,
                          size_t element_bytes) {
  Segments segments;
  segments.offset.reserve(counts.size());
  segments.bytes.reserve(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    // An empty block's displacement means nothing (it may lie past the buffer, which may be
    // null): it starts at the buffer's start, so no pointer leaves the buffer.
    segments.offset.push_back(counts[i] > 0 ? displs[i] * element_bytes : 0);
    segments.bytes.push_back(counts[i] * element_bytes);
  }
  return segments;
}

Segments Segments::OfRanks(const std::vector<int>& ranks, size_t bytes) {
  Segments segments;
  for (int r : ranks) {
    segments.offset.push_back(r * bytes);
    segments.bytes.push_back(bytes);
  }
  return segments;
}

Segments Segments::PerRank(const CollectiveArgs& args, int ranks, bool send_side) {
  const size_t es = args.element_bytes();
  if (args.blocks == nullptr) return Even(args.count * ranks, ranks, es);
  const BlockLayout& layout = *args.blocks;
  return send_side ? Blocks(layout.send_counts, layout.send_displs, es)
                   : Blocks(layout.recv_counts, layout.recv_displs, es);
}

size_t Segments::extent() const {
  size_t end = 0;
  for (size_t i = 0; i < offset.size(); ++i) {
    if (bytes[i] > 0) end = std::max(end, offset[i] + bytes[i]);
  }
  return end;
}

absl::Status GroupRingReduceScatter(Peers& peers, const RankGroup& group, const std::byte* input,
                                    std::byte* data, const Segments& segments, DataType dtype,
                                    ReduceOp op, uint32_t step) {
  const int n = group.size(), me = group.me;
  const int right = group.at(me + 1), left = group.at(me - 1);
  // After step s, segment me-s-2 of data holds the reduction over members me-s-2 .. me; the
  // segment sent first is still only the input's.
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(me - s - 1, n), in = Mod(me - s - 2, n);
    const std::byte* from = s == 0 ? input : data;
    Transfer sent = peers.Send(right, step + s, from + segments.offset[out], segments.bytes[out]);
    Transfer received = peers.Recv(
        left, step + s,
        RecvSink::Reduce(data + segments.offset[in], dtype, op, input + segments.offset[in]),
        segments.bytes[in]);
    if (absl::Status st = peers.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status GroupRingAllGather(Peers& peers, const RankGroup& group, std::byte* data,
                                const Segments& segments, uint32_t step) {
  const int n = group.size(), me = group.me;
  const int right = group.at(me + 1), left = group.at(me - 1);
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(me - s, n), in = Mod(me - s - 1, n);
    Transfer sent = peers.Send(right, step + s, data + segments.offset[out], segments.bytes[out]);
    Transfer received =
        peers.Recv(left, step + s, RecvSink::Copy(data + segments.offset[in]), segments.bytes[in]);
    if (absl::Status st = peers.Wait({sent, received}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

RingAllReduce::RingAllReduce(Peers& peers, const CollectiveArgs& args)
    : peers_(peers), args_(args) {}

absl::Status RingAllReduce::Run() {
  const int p = peers_.size();
  const size_t es = args_.element_bytes();
  auto* data = static_cast<std::byte*>(args_.recv);
  const auto* input = static_cast<const std::byte*>(args_.send);
  if (p == 1) {
    CopyBlock(data, input, args_.count * es);
    return absl::OkStatus();
  }
  const RankGroup group = RankGroup::Whole(peers_);
  const Segments segments = Segments::Even(args_.count, p, es);
  // The all-gather overwrites every segment the reduce-scatter leaves unreduced.
  if (absl::Status s =
          GroupRingReduceScatter(peers_, group, input, data, segments, args_.dtype, args_.op, 0);
      !s.ok()) {
    return s;
  }
  return GroupRingAllGather(peers_, group, data, segments, p - 1);
}

RingReduceScatter::RingReduceScatter(Peers& peers, const CollectiveArgs& args)
    : peers_(peers),
      args_(args),
      blocks_(Segments::PerRank(args, peers.size(), /*send_side=*/true)) {}

absl::Status RingReduceScatter::Run() {
  const int p = peers_.size(), r = peers_.rank();
  const auto* send = static_cast<const std::byte*>(args_.send);
  if (p == 1) {
    CopyBlock(args_.recv, send, blocks_.bytes[0]);
    return absl::OkStatus();
  }
  // The partial sums accumulate in scratch: the caller's send buffer is read-only.
  std::byte* work = peers_.Scratch(blocks_.extent());
  if (absl::Status s = GroupRingReduceScatter(peers_, RankGroup::Whole(peers_), send, work, blocks_,
                                              args_.dtype, args_.op, 0);
      !s.ok()) {
    return s;
  }
  CopyBlock(args_.recv, work + blocks_.offset[r], blocks_.bytes[r]);
  return absl::OkStatus();
}

RingAllGather::RingAllGather(Peers& peers, const CollectiveArgs& args)
    : peers_(peers),
      args_(args),
      blocks_(Segments::PerRank(args, peers.size(), /*send_side=*/false)) {}

absl::Status RingAllGather::Run() {
  const int r = peers_.rank();
  auto* data = static_cast<std::byte*>(args_.recv);
  CopyBlock(data + blocks_.offset[r], args_.send, blocks_.bytes[r]);
  return GroupRingAllGather(peers_, RankGroup::Whole(peers_), data, blocks_, 0);
}

}  // namespace weft
