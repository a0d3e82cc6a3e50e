// The per-SIMD-level tables of kernel entry points that the public functions dispatch through.
//
// Each level lives in its own translation unit, compiled with that level's target flags, and
// exports nothing but its constant-initialised table: no code of a wider level can run before
// dispatch has checked the CPU, and no inline function compiled for a wider level can be picked
// by the linker for a narrower caller.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/kernels/dtype.h"

namespace weft::kernels_internal {

// dst[i] = a[i] (op) b[i]; dst is a, b, or disjoint from both.
using BinaryFn = void (*)(void* dst, const void* a, const void* b, size_t count);
// dst[i] = srcs[0][i] (op) ... (op) srcs[n-1][i] with n >= 2; dst may be one of the sources.
using ManyFn = void (*)(void* dst, const void* const* srcs, int n, size_t count);
// data[i] /= divisor; divisor != 0 for the integer types.
using DivideFn = void (*)(void* data, size_t count, int divisor);
using WidenFn = void (*)(const uint16_t* src, float* dst, size_t count);
using NarrowFn = void (*)(const float* src, uint16_t* dst, size_t count);

// The four combining operators; kAvg maps to kSum.
inline constexpr int kNumCombineOps = 4;

struct KernelTable {
  BinaryFn binary[kNumDataTypes][kNumCombineOps];
  ManyFn many[kNumDataTypes][kNumCombineOps];
  // The same, for a dst disjoint from every source and too large to stay in cache: written with
  // non-temporal stores where the level has them.
  BinaryFn binary_streaming[kNumDataTypes][kNumCombineOps];
  ManyFn many_streaming[kNumDataTypes][kNumCombineOps];
  DivideFn divide[kNumDataTypes];
  WidenFn half_to_float;
  NarrowFn float_to_half;
  WidenFn bfloat16_to_float;
  NarrowFn float_to_bfloat16;
};

extern const KernelTable kScalarKernels;
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;

}  // namespace weft::kernels_internal
