// ShardLayout: how a flat buffer of units is cut into equal per-rank slices (ZeRO, FSDP).
//
//   std::vector<weft::shard::Unit> units = {{"embeddings", 0, 4096}, {"h.0", 4096, 8192}};
//   absl::StatusOr<weft::shard::ShardLayout> layout = weft::shard::ShardLayout::Create(units, 4);
//   layout->owned(rank, u)        // the flat range `rank` owns of unit u
//   layout->Locate(i)             // (rank, offset in that rank's shard) of flat element i
//   layout->Global(rank, offset)  // and back
//
// A unit is a contiguous range of the flat buffer that is reduced or gathered at once: the
// embeddings, one transformer block, the final norm. Units tile the buffer back to back and each
// one's length is a multiple of ranks × kAlign elements (PaddedLength rounds a length up to one,
// and the model leaves the padding zero): rank r owns elements [begin + r·slice, begin +
// (r+1)·slice) of every unit, so a unit's reduce-scatter and all-gather are single in-place
// collectives of `slice` elements a rank, and every slice starts on a 64-byte boundary. A rank's
// shard is its slices of every unit back to back, in unit order.
//
// Pure: a layout reads only the units it is given. Every rank builds the same one; hash() lets
// them check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::shard {

struct Unit {
  std::string name;
  size_t begin = 0;   // first element in the flat buffer
  size_t length = 0;  // elements, padding included
};

// A range of elements of the flat buffer.
struct Range {
  size_t begin = 0;
  size_t length = 0;
};

class ShardLayout {
 public:
  // Slices start on multiples of this many elements (64 bytes of fp32).
  static constexpr size_t kAlign = 16;

  // `length` rounded up to a multiple of ranks × kAlign.
  static size_t PaddedLength(size_t length, int ranks);

  // Errors: no units, ranks < 1, units that do not tile [0, total) in order, a unit whose length
  // is not a multiple of ranks × kAlign (names the unit and the padded length it needs).
  static absl::StatusOr<ShardLayout> Create(std::vector<Unit> units, int ranks);

  int ranks() const { return ranks_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const Unit& unit(int u) const { return units_[u]; }
  // Elements every rank owns of unit u.
  size_t slice(int u) const { return units_[u].length / ranks_; }
  // Where unit u's slice starts in a rank's shard.
  size_t shard_offset(int u) const { return shard_offsets_[u]; }
  // Elements every rank owns in all: the sum of the slices.
  size_t shard_size() const { return shard_size_; }
  // Elements of the whole flat buffer.
  size_t total() const { return total_; }

  // The flat range `rank` owns of unit u.
  Range owned(int rank, int u) const;
  // The flat ranges `rank` owns, in unit order (its shard, range by range).
  std::vector<Range> owned(int rank) const;

  struct Location {
    int rank = 0;
    size_t offset = 0;  // in that rank's shard
  };
  Location Locate(size_t flat) const;
  size_t Global(int rank, size_t shard_offset) const;

  // Identical on every rank that built the same layout.
  uint64_t hash() const { return hash_; }

 private:
  ShardLayout() = default;
  int UnitAt(size_t flat) const;

  std::vector<Unit> units_;
  std::vector<size_t> shard_offsets_;
  int ranks_ = 1;
  size_t shard_size_ = 0;
  size_t total_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace weft::shard
