// TieredStore: named flat float arrays (a tensor, or a shard of one), each kept in one tier.
//
// Tiers:
//   kMemory      a plain host array; streams hand it over in place.
//   kPinnedHost  page-locked host memory a GPU can copy from asynchronously. It exists only in
//                GPU builds; this build has none, so Add refuses it (Unimplemented).
//   kDisk        a scratch file in the store's directory, moved by the store's IoEngine.
//
// A disk array is cut into tiles of tile_floats() elements (tile_blocks blocks of block_bytes);
// the last tile holds the tail. On disk each tile is a kTileHeaderBytes header followed by its
// data padded to kIoAlignment, at TileOffset(tile). The header carries the array's name hash, the
// tile index, the element count and the data's Checksum64; the store also keeps every tile's
// checksum in memory. Every read verifies all of them: a torn, stale or corrupted tile is a
// DataLoss error naming the array, the tile, the file and the offset.
//
// The directory is created if missing. Files are scratch (durable state lives in checkpoints):
// each is removed when the store is destroyed, and the directory too if the store created it.
// A store is used by one thread at a time. An I/O failure that leaves requests in flight
// (a missed deadline) breaks the store: every later call returns that error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "weft/offload/aligned_buffer.h"
#include "weft/offload/io_engine.h"
#include "weft/offload/io_file.h"

namespace weft::offload {

enum class Tier { kMemory, kPinnedHost, kDisk };

// "memory", "pinned_host" or "disk".
absl::string_view TierName(Tier tier);

// Bytes before each tile's data on disk: the header, one aligned block.
inline constexpr size_t kTileHeaderBytes = kIoAlignment;

struct TieredStoreOptions {
  // Where disk arrays live; created (with parents) if missing.
  std::string dir;
  // The unit of disk transfers: a multiple of kIoAlignment.
  size_t block_bytes = size_t{1} << 20;
  // Blocks per tile (at least 1): a tile is tile_blocks * block_bytes bytes of floats.
  size_t tile_blocks = 4;
  // Open files with O_DIRECT where the filesystem allows it.
  bool direct_io = true;
  IoEngineOptions io;
  // The longest any single wait for I/O may take before it is an error.
  absl::Duration io_timeout = absl::Seconds(60);
  // How files are opened (IoFile::OpenFn); null for ::open.
  IoFile::OpenFn open_file;
};

// What the store's disk traffic has cost since it was created.
struct IoCounters {
  uint64_t bytes_read = 0;     // tile headers and padding included
  uint64_t bytes_written = 0;  // likewise
  absl::Duration blocked;      // time spent waiting for I/O to complete
};

class TieredStore {
 public:
  // A store over `options.dir`. InvalidArgument for a bad geometry or empty dir; errors of
  // creating the directory or the I/O engine name them.
  static absl::StatusOr<std::unique_ptr<TieredStore>> Create(TieredStoreOptions options);
  // Removes the store's files (and its directory if it created it).
  ~TieredStore();
  TieredStore(const TieredStore&) = delete;
  TieredStore& operator=(const TieredStore&) = delete;

  // A new array `name` of `size` zeros in `tier`. AlreadyExists for a taken name; Unimplemented
  // for kPinnedHost in this build; for kDisk, errors of creating or writing its file.
  absl::Status Add(absl::string_view name, Tier tier, size_t size);
  // The same, holding a copy of `initial`.
  absl::Status Add(absl::string_view name, Tier tier, absl::Span<const float> initial);
  // Replaces the whole of array `name` with `data` (of its size). NotFound for an unknown name,
  // InvalidArgument for a size mismatch.
  absl::Status Write(absl::string_view name, absl::Span<const float> data);
  // Copies the whole of array `name` into `out` (of its size); disk tiles are verified.
  absl::Status Read(absl::string_view name, absl::Span<float> out);

  // Whether `name` exists; its size in elements and its tier (NotFound otherwise).
  bool Contains(absl::string_view name) const;
  absl::StatusOr<size_t> Size(absl::string_view name) const;
  absl::StatusOr<Tier> TierOf(absl::string_view name) const;
  // A memory-tier array's elements, in place (FailedPrecondition for other tiers).
  absl::StatusOr<float*> MemoryData(absl::string_view name);
  // A disk array's file (FailedPrecondition for other tiers).
  absl::StatusOr<const IoFile*> FileOf(absl::string_view name) const;

  // Elements per tile, and the tiles of an array of `size` elements.
  size_t tile_floats() const { return tile_floats_; }
  size_t TileCount(size_t size) const { return (size + tile_floats_ - 1) / tile_floats_; }
  // Where tile `tile` (its header) starts in a disk array's file.
  uint64_t TileOffset(size_t tile) const { return tile * (kTileHeaderBytes + tile_bytes_); }

  const IoEngine& engine() const { return *engine_; }
  // "O_DIRECT" or the buffered mode of the last disk array added ("none" before one).
  const std::string& io_mode() const { return io_mode_; }
  const IoCounters& counters() const { return counters_; }
  const TieredStoreOptions& options() const { return options_; }

 private:
  friend class TileStream;
  struct Array {
    std::string name;
    uint64_t key = 0;  // Fnv1a of the name, kept in every tile header
    Tier tier = Tier::kMemory;
    size_t size = 0;
    std::vector<float> memory;        // kMemory
    std::unique_ptr<IoFile> file;     // kDisk
    std::vector<uint64_t> checksums;  // kDisk: each tile's data checksum as last written
  };

  TieredStore(TieredStoreOptions options, std::unique_ptr<IoEngine> engine, bool made_dir);
  // The array `name`: NotFound if there is none; FailedPrecondition if it is in another tier;
  // InvalidArgument if it does not hold `size` elements (for `what`, "read" or "write").
  absl::StatusOr<Array*> Find(absl::string_view name) const;
  absl::StatusOr<Array*> FindIn(absl::string_view name, Tier tier) const;
  absl::StatusOr<Array*> FindSized(absl::string_view name, size_t size,
                                   absl::string_view what) const;
  absl::Status AddArray(absl::string_view name, Tier tier, size_t size, const float* initial);
  // The first `count` staging buffers of kTileHeaderBytes + a tile each, allocated on first use.
  std::vector<std::byte*> Staging(size_t count);

  TieredStoreOptions options_;
  size_t tile_bytes_;
  size_t tile_floats_;
  bool made_dir_;
  std::string io_mode_ = "none";
  absl::Status broken_;  // set when I/O may still be in flight after a failed pass
  IoCounters counters_;
  absl::flat_hash_map<std::string, std::unique_ptr<Array>> arrays_;
  // Declared after the buffers, so destroyed first: in-flight I/O ends before they are freed.
  std::vector<AlignedBuffer> staging_;
  std::unique_ptr<IoEngine> engine_;
};

}  // namespace weft::offload
