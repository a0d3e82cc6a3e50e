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

// Whether a direct algorithm writes its output with StreamingCopy, given `host_bytes`, the
// inputs and outputs of all the collective's ranks on this host together. It writes the output
// piece by piece, each piece too small for memcpy to stream. Once the buffers outgrow the
// last-level cache (StreamingThresholdBytes, as for the reduction kernels), a line written with
// ordinary stores costs a read from DRAM first; before, the lines a benchmark's loop or a
// training step wrote last time are still cached, and a non-temporal store must first evict
// them.
bool StreamsOutput(size_t host_bytes);

}  // namespace weft
