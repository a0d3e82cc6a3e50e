// Operands for the kernel benchmarks, filled with values that keep each row's timing steady.
//
// A benchmark repeats one call thousands of times, and ReduceInto feeds its output back in as an
// input. Left to drift, float sums would overflow to infinity and products decay to subnormals,
// which time differently from ordinary data (subnormals take microcode assists, and the scalar
// fp16/bf16 conversions branch on the class of a value). So for float types the accumulating
// operand of a sum lies where the increment rounds away (2^p <= |x| < 2^(p+1) for a significand
// of p digits, against increments below 1/2), and the other factors of a product are +-1: the
// accumulator keeps its value and every value stays a normal number. Integers wrap, which costs
// nothing, so they and min/max get varied values.
#pragma once

#include <cstddef>
#include <vector>

#include "page_buffer.h"
#include "weft/kernels/dtype.h"

namespace weft::kernel_bench {

// Fills `count` elements of `type` at `data` with varied values, none zero, all normal numbers in
// every floating-point type (magnitudes from 2^-13 to 126; integer types get them truncated).
void FillVaried(DataType type, void* data, size_t count);

// A destination and one or more source arrays of `bytes` each, held in `slots` copies so that a
// row can rotate through them (see kL3PoolBytes in kernel_bench.h).
class ReduceOperands {
 public:
  struct Slot {
    void* dst;
    const void* const* sources;
  };

  // With `accumulate` (ReduceInto), dst holds the accumulating operand and `sources` the
  // increments. Otherwise dst is a separate output and sources[0] holds the accumulating operand.
  ReduceOperands(DataType type, ReduceOp op, size_t bytes, int sources, bool accumulate, int slots);

  // False when the memory could not be had.
  bool ok() const { return ok_; }

  // In rotation order: a row walks them from the first to the last and wraps around.
  const std::vector<Slot>& slots() const { return slots_; }

 private:
  bool ok_ = true;
  // dst first, then the sources.
  std::vector<PageBuffer> arrays_;
  // The sources of each slot, which Slot::sources points into.
  std::vector<std::vector<const void*>> source_pointers_;
  std::vector<Slot> slots_;
};

}  // namespace weft::kernel_bench
