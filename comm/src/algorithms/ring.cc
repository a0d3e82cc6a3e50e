#include "algorithms/ring.h"

#include <cstring>

namespace weft {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

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

absl::Status GroupRingReduceScatter(Peers& peers, const RankGroup& group, std::byte* data,
                                    const Segments& segments, DataType dtype, ReduceOp op,
                                    uint32_t step) {
  const int n = group.size(), me = group.me;
  const int right = group.at(me + 1), left = group.at(me - 1);
  // After step s, segment me-s-2 holds the reduction over members me-s-2 .. me.
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(me - s - 1, n), in = Mod(me - s - 2, n);
    Transfer sent = peers.Send(right, step + s, data + segments.offset[out], segments.bytes[out]);
    Transfer received =
        peers.Recv(left, step + s, RecvSink::Reduce(data + segments.offset[in], dtype, op),
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
  if (args_.send != args_.recv) std::memcpy(data, args_.send, args_.count * es);
  if (p == 1) return absl::OkStatus();
  const RankGroup group = RankGroup::Whole(peers_);
  const Segments segments = Segments::Even(args_.count, p, es);
  if (absl::Status s =
          GroupRingReduceScatter(peers_, group, data, segments, args_.dtype, args_.op, 0);
      !s.ok()) {
    return s;
  }
  return GroupRingAllGather(peers_, group, data, segments, p - 1);
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
  if (absl::Status s =
          GroupRingReduceScatter(peers_, RankGroup::Whole(peers_), work,
                                 Segments::Even(args_.count * p, p, es), args_.dtype, args_.op, 0);
      !s.ok()) {
    return s;
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
  return GroupRingAllGather(peers_, RankGroup::Whole(peers_), data,
                            Segments::Even(args_.count * p, p, args_.element_bytes()), 0);
}

}  // namespace weft
