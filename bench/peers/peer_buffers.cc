#include "peer_buffers.h"

#include <cstring>

#include "common/expected_values.h"

namespace weft::peers {
namespace {

// Broadcast receivers start from a value no root input takes (inputs lie in [-2, 2]).
constexpr int64_t kUnwritten = 99;

}  // namespace

PeerBuffers::PeerBuffers(Collective collective, const Geometry& geometry, DataType type,
                         ReduceOp op, int rank, int ranks, bool in_place)
    : collective_(collective),
      geometry_(geometry),
      type_(type),
      op_(op),
      rank_(rank),
      ranks_(ranks),
      in_place_(in_place),
      element_size_(SizeOf(type)) {
  if (in_place) {
    first_.resize(std::max(geometry.send_count, geometry.recv_count) * element_size_);
    recv_ = first_.data();
    send_ = collective == Collective::kAllGather
                ? recv_ + static_cast<size_t>(rank) * geometry.send_count * element_size_
                : recv_;
  } else {
    first_.resize(geometry.send_count * element_size_);
    second_.resize(geometry.recv_count * element_size_);
    send_ = first_.data();
    recv_ = second_.data();
  }
}

void PeerBuffers::StoreInput(int rank, size_t index, std::byte* out) const {
  // Only reductions need the operator's inputs; moved data uses the sum pattern.
  const bool reduces =
      collective_ == Collective::kAllReduce || collective_ == Collective::kReduceScatter;
  testing::Store(type_, testing::InputValue(type_, reduces ? op_ : ReduceOp::kSum, rank, index),
                 out);
}

void PeerBuffers::Fill() {
  const size_t es = element_size_;
  if (collective_ == Collective::kBroadcast) {
    // Receivers must show that the root's data arrived; only the root has inputs.
    if (rank_ != 0 || !in_place_) {
      for (size_t i = 0; i < geometry_.recv_count; ++i) {
        testing::Store(type_, kUnwritten, recv_ + i * es);
      }
    }
    if (rank_ != 0) return;
  }
  const size_t base =
      collective_ == Collective::kAllGather ? static_cast<size_t>(rank_) * geometry_.send_count : 0;
  for (size_t i = 0; i < geometry_.send_count; ++i) StoreInput(rank_, base + i, send_ + i * es);
}

int64_t PeerBuffers::CountWrong() const {
  const size_t es = element_size_;
  std::byte want[8];
  int64_t wrong = 0;
  for (size_t i = 0; i < geometry_.recv_count; ++i) {
    switch (collective_) {
      case Collective::kAllReduce:
        testing::StoreExpected(type_, op_, ranks_, i, want);
        break;
      case Collective::kReduceScatter:
        testing::StoreExpected(type_, op_, ranks_,
                               static_cast<size_t>(rank_) * geometry_.recv_count + i, want);
        break;
      case Collective::kAllGather:
        StoreInput(static_cast<int>(i / geometry_.send_count), i, want);
        break;
      case Collective::kBroadcast:
        StoreInput(0, i, want);
        break;
    }
    if (std::memcmp(want, recv_ + i * es, es) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace weft::peers
