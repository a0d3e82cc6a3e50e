// Element-wise reduction kernels, the arithmetic core of every reducing collective.
//
// Each entry point dispatches once per call on (type, op) and then runs a loop specialised for
// the widest SIMD level the CPU offers (AVX-512, AVX2, or portable scalar code). Integer results
// are bit-identical on every level; floating-point results are identical as well because every
// level evaluates the same per-element operation in the same order (no horizontal reassociation).
//
// fp16 and bf16 are widened to fp32, combined in fp32 and rounded back to nearest-even once per
// call. ReduceMany therefore rounds once for all of its sources, which is why the shared-memory
// direct algorithms prefer it over repeated pairwise calls.
//
// kAvg is treated as kSum by these kernels: a collective sums first and calls DivideBy at the end.
// kMin is `a < b ? a : b` and kMax `a > b ? a : b`, with `a` the accumulated (left) operand and
// `b` the incoming one, exactly as vminps/vmaxps compute: a NaN on either side yields `b`. A sum
// or product with one NaN operand yields that NaN, quieted; with two, a quiet NaN of either.
// Integer sums and products wrap modulo 2^bits. Invalid types or operators, n < 1 and count 0
// do nothing (callers validate their arguments).
//
// Outputs of at least StreamingThresholdBytes() that overlap no source are written with
// non-temporal stores: the write then skips reading the destination into the cache first.
#pragma once

#include <cstddef>

#include "weft/kernels/dtype.h"

namespace weft {

enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// The level used by the kernels: the best the CPU supports, lowered by WEFT_SIMD=scalar|avx2|avx512
// (a request above what the CPU supports is clamped to what it supports; other values are
// ignored).
SimdLevel ActiveSimdLevel();
const char* Name(SimdLevel level);

// For tests and benchmarks: every later kernel call uses `level` (clamped to the CPU's support).
void SetSimdLevelForTesting(SimdLevel level);

// dst[i] = dst[i] (op) src[i] for i < count.
void ReduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);

// dst[i] = a[i] (op) b[i]. dst may alias a or b exactly (not partially).
void Reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[n-1][i], combined left to right.
// dst may alias any one source exactly. n >= 1.
void ReduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);

// Half the outermost cache a core sees (Linux's sysfs, else sysconf; 16 MiB where neither says):
// data of this size or more would not stay cached anyway, so writing it around the cache skips
// reading every line first and cuts a quarter of the memory traffic of a two-source reduction;
// the other half leaves room for the sources and for other ranks on the same host.
size_t StreamingThresholdBytes();

// data[i] = data[i] / divisor: the final step of kAvg. Integers truncate toward zero (modulo
// 2^bits, so INT_MIN / -1 wraps); fp16/bf16 divide in fp32 and round once. Divisor 1, and 0 for
// integers, leave the data unchanged; a float divisor of 0 gives IEEE infinities and NaNs.
void DivideBy(DataType type, void* data, size_t count, int divisor);

}  // namespace weft
