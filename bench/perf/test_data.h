// The values a rank sends and the values it must then hold, for one correctness check.
//
// Reductions use bench/common/expected_values.h, whose results are exact and independent of the
// reduction order, so results compare bit for bit. Data movement (gather, broadcast, alltoall,
// ...) uses a hash of (seed, rank, index) instead, so an element that lands in the wrong place or
// comes from the wrong rank is caught; the hash is cut to integers the type holds exactly.
// The seed changes between checks, so a buffer left over from an earlier operation never passes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "perf/collective.h"
#include "weft/kernels/dtype.h"

namespace weft::perf {

class TestData {
 public:
  TestData(DataType type, ReduceOp op, bool reduces, int ranks, uint64_t seed);

  // Writes `rank`'s input elements [0, count) to `data`.
  void FillInput(int rank, void* data, size_t count) const;

  // How many of the block's elements in `recv` (the whole receive region) differ from what they
  // must be, compared byte for byte.
  int64_t CountWrong(const void* recv, const Block& block) const;

 private:
  // Element `index` of `rank`'s input, or for Block::kReduced the reduction over all ranks.
  void StoreInput(int rank, uint64_t index, void* out) const;
  void StoreExpected(int source_rank, uint64_t index, void* out) const;

  DataType type_;
  ReduceOp op_;
  bool reduces_;
  int ranks_;
  uint64_t seed_;
  size_t element_size_;
};

}  // namespace weft::perf
