#include "weft/shard/shard_layout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "weft/kernels/hash.h"

namespace weft::shard {

size_t ShardLayout::PaddedLength(size_t length, int ranks) {
  const size_t quantum = static_cast<size_t>(std::max(ranks, 1)) * kAlign;
  return (length + quantum - 1) / quantum * quantum;
}

absl::StatusOr<ShardLayout> ShardLayout::Create(std::vector<Unit> units, int ranks) {
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("shard layout: ", ranks, " ranks"));
  if (units.empty()) return absl::InvalidArgumentError("shard layout: no units");
  ShardLayout layout;
  layout.ranks_ = ranks;
  uint64_t h = Fnv1a(&ranks, sizeof(ranks));
  for (const Unit& unit : units) {
    if (unit.begin != layout.total_) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard layout: unit ", unit.name, " begins at element ", unit.begin,
                       " where the units before it end at ", layout.total_));
    }
    if (unit.length == 0 || unit.length % (static_cast<size_t>(ranks) * kAlign) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard layout: unit ", unit.name, " has ", unit.length, " elements, not a multiple of ",
          ranks, " ranks x ", kAlign, " (pad it to ", PaddedLength(unit.length, ranks), ")"));
    }
    layout.shard_offsets_.push_back(layout.shard_size_);
    layout.shard_size_ += unit.length / ranks;
    layout.total_ += unit.length;
    h = Fnv1a(unit.name, h);
    h = Fnv1a(&unit.length, sizeof(unit.length), h);
  }
  layout.units_ = std::move(units);
  layout.hash_ = h;
  return layout;
}

Range ShardLayout::owned(int rank, int u) const {
  return Range{units_[u].begin + static_cast<size_t>(rank) * slice(u), slice(u)};
}

std::vector<Range> ShardLayout::owned(int rank) const {
  std::vector<Range> ranges;
  for (int u = 0; u < num_units(); ++u) ranges.push_back(owned(rank, u));
  return ranges;
}

int ShardLayout::UnitAt(size_t flat) const {
  // The last unit that begins at or before `flat`.
  const auto after = std::upper_bound(units_.begin(), units_.end(), flat,
                                      [](size_t i, const Unit& unit) { return i < unit.begin; });
  return static_cast<int>(after - units_.begin()) - 1;
}

ShardLayout::Location ShardLayout::Locate(size_t flat) const {
  const int u = UnitAt(flat);
  const size_t within = flat - units_[u].begin;
  return Location{static_cast<int>(within / slice(u)), shard_offsets_[u] + within % slice(u)};
}

size_t ShardLayout::Global(int rank, size_t shard_offset) const {
  const auto after = std::upper_bound(shard_offsets_.begin(), shard_offsets_.end(), shard_offset);
  const int u = static_cast<int>(after - shard_offsets_.begin()) - 1;
  return owned(rank, u).begin + (shard_offset - shard_offsets_[u]);
}

}  // namespace weft::shard
