// TileStream: one pass over the tiles of several arrays of equal length (e.g. param, m, v).
//
// Run(fn) calls fn once per tile, in order 0..T-1, with pointers to each array's elements of that
// tile. While fn works on tile i, the stream has reads of tiles i+1..i+prefetch in flight and
// writes tile i-1 back, so a pass costs about the larger of its I/O time and its compute time,
// not their sum. Memory-tier arrays are handed over in place, with no copy. Each array is
//   kReadOnly   read and verified, never written back (fn must not modify it: a memory-tier
//               array is the array itself);
//   kReadWrite  read, verified, and written back with a new checksum after fn;
//   kWriteOnly  not read: fn gets the tile with unspecified contents and must write every
//               element; written back after fn.
// The first error (fn's, an I/O error, a failed verification, a missed deadline) stops the pass
// and is returned; the pass still waits for the I/O it started. Tiles fn returned OK for before
// the error have been, or are being, written back; later ones are unchanged.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "weft/offload/tiered_store.h"

namespace weft::offload {

enum class StreamAccess { kReadOnly, kReadWrite, kWriteOnly };

struct StreamArray {
  std::string name;
  StreamAccess access = StreamAccess::kReadWrite;
};

// What fn gets for one tile: `data[k]` holds `count` elements of arrays[k], starting at element
// `offset` of that array (offset == index * tile_floats()).
struct StreamTile {
  size_t index = 0;
  size_t offset = 0;
  size_t count = 0;
  absl::Span<float* const> data;
};

struct StreamOptions {
  // Tiles read ahead of the one fn works on, in [1, 8]. Staging memory per disk array is
  // (prefetch + 2) tiles: one in fn, `prefetch` being read, one being written back.
  int prefetch = 2;
};

class TileStream {
 public:
  // A pass over `arrays` of `store` (which must outlive the stream).
  TileStream(TieredStore* store, std::vector<StreamArray> arrays, StreamOptions options = {});

  // Runs the pass. InvalidArgument for no arrays, a name given twice, arrays of unequal sizes or
  // a bad prefetch; NotFound for an unknown array; otherwise the first error, as above. A pass
  // over arrays of size 0 calls fn never and returns OK.
  absl::Status Run(absl::FunctionRef<absl::Status(const StreamTile&)> fn);

 private:
  TieredStore* store_;
  std::vector<StreamArray> arrays_;
  StreamOptions options_;
};

}  // namespace weft::offload
