// StreamingCopy: memcpy that writes around the cache, for destinations too large to stay cached.
//
// A receive copies out of the FIFO one slot at a time, so memcpy never sees the size of the whole
// message and always uses ordinary stores. For a destination of many megabytes those stores first
// read every line from DRAM (read-for-ownership) only to overwrite it, and evict the cache the
// FIFO lives in: a third of the memory traffic for nothing. Non-temporal stores skip both.
#pragma once

#include <cstddef>

namespace weft {

// Copies `bytes` bytes like memcpy (no overlap), writing whole cache lines with non-temporal
// stores where the CPU has them. Call StreamingCopyDone() before another thread may read `dst`.
void StreamingCopy(void* dst, const void* src, size_t bytes);

// StreamingCopy that also copies `src` to `kept` with ordinary stores, reading it once: for a
// rank that hands its input to its peers through a cached buffer and writes it to its own large
// output as well. `source_in_dram` says the whole source is too large to have been left in the
// caches, so its lines are read the way StreamingCopy reads a large source.
void StreamingCopyKeeping(void* dst, void* kept, const void* src, size_t bytes,
                          bool source_in_dram);

// StreamingCopy when `stream`, else memcpy: for callers that decide per operation.
void CopyOut(bool stream, void* dst, const void* src, size_t bytes);

// Orders earlier streaming stores before any later store (e.g. one that publishes completion).
void StreamingCopyDone();

// The direct algorithms write an output of this many bytes or more with StreamingCopy. They
// write it piece by piece, each piece too small for memcpy to stream, and beyond the L2 a line
// written with ordinary stores costs a read from L3 or DRAM first. Measured on a 2-core VM: an
// all-reduce of 1 MiB gains 5-15% this way, while below it the output is cheaper kept cached.
constexpr size_t kStreamedOutputBytes = size_t{1} << 20;

}  // namespace weft
