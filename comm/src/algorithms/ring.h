// Ring algorithms: every rank sends to its right neighbour and receives from its left, p-1 steps
// per phase.
//
// Bandwidth-optimal on any topology whose links are equally fast: each rank sends and receives
// (p-1)/p of the data per phase. Latency grows linearly with p, which is why small messages go
// to Rabenseifner or the shared-memory direct algorithms instead.
//
// The steps run over any group of the communicator's ranks (the whole communicator, or the
// hierarchical algorithms' node and lane groups): a group is only a list of ranks whose messages
// travel on the communicator's own links, so making one costs nothing and needs no rendezvous.
// Segments may differ in size (uneven nodes give uneven node portions), including zero bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/algorithm.h"

namespace weft {

struct RankGroup {
  std::vector<int> ranks;  // the communicator's ranks, in ring order
  int me = 0;              // this rank's index in `ranks`

  // Every rank of the communicator, in rank order.
  static RankGroup Whole(const Peers& peers);

  int size() const { return static_cast<int>(ranks.size()); }
  int at(int index) const {
    const int n = size();
    return ranks[((index % n) + n) % n];
  }
};

// Byte ranges of a buffer, one per group member.
struct Segments {
  std::vector<size_t> offset;
  std::vector<size_t> bytes;

  // `count` elements of `element_bytes` split as Partition does, starting at byte `base`.
  static Segments Even(size_t count, int parts, size_t element_bytes, size_t base = 0);
  // Part i: counts[i] elements at element displs[i] (a variable-count collective's blocks).
  static Segments Blocks(const std::vector<size_t>& counts, const std::vector<size_t>& displs,
                         size_t element_bytes);
  // Part i: the block of `bytes` bytes of rank ranks[i], in a buffer of one block per rank.
  static Segments OfRanks(const std::vector<int>& ranks, size_t bytes);
  // The plan of a collective's per-rank blocks of its large buffer: `layout`'s (send or recv
  // side) for the *_v collectives, args.count elements each otherwise.
  static Segments PerRank(const CollectiveArgs& args, int ranks, bool send_side);

  // Where the last byte of any part ends.
  size_t extent() const;
};

// Ring reduce-scatter of `input`'s segments into `data`: afterwards segment `group.me` of `data`
// holds the reduction over the group, and every other segment but the one at me - 1 is written
// with a partial sum. `input` is only read, and may be `data` itself (in place): each step reduces
// the arriving segment with the input's own, so nothing is copied up front. Uses steps
// step .. step + size - 2.
absl::Status GroupRingReduceScatter(Peers& peers, const RankGroup& group, const std::byte* input,
                                    std::byte* data, const Segments& segments, DataType dtype,
                                    ReduceOp op, uint32_t step);

// Ring all-gather: segment `group.me` is complete on entry; afterwards every segment is. Uses
// steps step .. step + size - 2.
absl::Status GroupRingAllGather(Peers& peers, const RankGroup& group, std::byte* data,
                                const Segments& segments, uint32_t step);

// Reduce-scatter then all-gather over p segments of the result buffer.
class RingAllReduce final : public Algorithm {
 public:
  RingAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
};

// Reduce-scatter and all-gather over the per-rank blocks: equal ones (reduce_scatter,
// all_gather) or the caller's (reduce_scatter_v, all_gather_v), which a message of each step
// carries whole, so a rank that disagrees on a block's size fails the receive.
class RingReduceScatter final : public Algorithm {
 public:
  RingReduceScatter(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const Segments blocks_;  // of the send buffer, packed from byte 0
};

class RingAllGather final : public Algorithm {
 public:
  RingAllGather(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const Segments blocks_;  // of the receive buffer
};

}  // namespace weft
