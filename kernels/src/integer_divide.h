// Exact, truncating integer division of a whole buffer by one divisor, for every integer type.
//
// The quotient truncates toward zero and is reduced modulo 2^bits, which makes every divisor
// except 0 well defined: INT_MIN / -1 wraps to INT_MIN, and an unsigned value divided by a
// negative divisor is -(x / |divisor|) modulo 2^bits. The divisor must not be 0.
//
// These are portable, and fast enough that the SIMD levels use them for the 8- and 64-bit types:
// a per-call multiply-and-shift reciprocal (Granlund and Montgomery, "Division by Invariant
// Integers using Multiplication", 1994) replaces the hardware divide, which costs tens of cycles
// per 64-bit element.
#pragma once

#include <cstddef>

namespace weft::kernels_internal {

void DivideInt8(void* data, size_t count, int divisor);
void DivideUint8(void* data, size_t count, int divisor);
void DivideInt32(void* data, size_t count, int divisor);
void DivideUint32(void* data, size_t count, int divisor);
void DivideInt64(void* data, size_t count, int divisor);
void DivideUint64(void* data, size_t count, int divisor);

}  // namespace weft::kernels_internal
