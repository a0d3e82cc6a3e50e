#include "weft/offload/tile_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tile_format.h"

namespace weft::offload {
namespace {

// Set in a request's tag for writes; the rest of the tag is slot * arrays + array.
constexpr uint64_t kWriteBit = uint64_t{1} << 63;

// One tile's staging: a buffer per disk array (null for memory arrays) and its I/O in flight.
struct Slot {
  size_t tile = 0;
  int reads = 0;
  int writes = 0;
  std::vector<std::byte*> buffers;
};

}  // namespace

TileStream::TileStream(TieredStore* store, std::vector<StreamArray> arrays, StreamOptions options)
    : store_(store), arrays_(std::move(arrays)), options_(options) {}

absl::Status TileStream::Run(absl::FunctionRef<absl::Status(const StreamTile&)> fn) {
  TieredStore& store = *store_;
  if (!store.broken_.ok()) return store.broken_;
  if (arrays_.empty()) return absl::InvalidArgumentError("tile stream: no arrays");
  if (options_.prefetch < 1 || options_.prefetch > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("tile stream: prefetch ", options_.prefetch, " is outside [1, 8]"));
  }
  const size_t n_arrays = arrays_.size();
  std::vector<TieredStore::Array*> arrays;
  size_t n_disk = 0;
  for (const StreamArray& spec : arrays_) {
    absl::StatusOr<TieredStore::Array*> array = store.Find(spec.name);
    if (!array.ok()) return array.status();
    for (const TieredStore::Array* seen : arrays) {
      if (seen == *array) {
        return absl::InvalidArgumentError(
            absl::StrCat("tile stream: array '", spec.name, "' given twice"));
      }
    }
    if (!arrays.empty() && (*array)->size != arrays[0]->size) {
      return absl::InvalidArgumentError(absl::StrCat("tile stream: array '", spec.name, "' has ",
                                                     (*array)->size, " elements, array '",
                                                     arrays_[0].name, "' ", arrays[0]->size));
    }
    if ((*array)->tier == Tier::kDisk) ++n_disk;
    arrays.push_back(*array);
  }
  const size_t size = arrays[0]->size;
  const size_t tiles = store.TileCount(size);
  if (tiles == 0) return absl::OkStatus();

  const size_t prefetch = static_cast<size_t>(options_.prefetch);
  std::vector<Slot> slots(prefetch + 2);
  const std::vector<std::byte*> staging = store.Staging(slots.size() * n_disk);
  for (size_t s = 0, next = 0; s < slots.size(); ++s) {
    for (const TieredStore::Array* array : arrays) {
      slots[s].buffers.push_back(array->tier == Tier::kDisk ? staging[next++] : nullptr);
    }
  }
  const auto tile_count = [&](size_t tile) {
    return std::min(store.tile_floats_, size - tile * store.tile_floats_);
  };
  const auto tile_id = [&](size_t k, size_t tile) {
    return internal::TileId{arrays[k]->key, tile, tile_count(tile)};
  };

  IoEngine& engine = *store.engine_;
  IoCounters& counters = store.counters_;
  absl::Status io_error;  // the first failed completion
  std::vector<IoCompletion> done;

  // Submits slot `s`'s tile of array `k` as requests of at most a block (plus the header).
  const auto submit = [&](size_t s, size_t k, IoOp op) {
    Slot& slot = slots[s];
    const uint64_t base = store.TileOffset(slot.tile);
    const size_t extent = kTileHeaderBytes + AlignUp(tile_count(slot.tile) * sizeof(float));
    const uint64_t tag = (op == IoOp::kWrite ? kWriteBit : 0) | (s * n_arrays + k);
    std::vector<IoRequest> requests;
    for (size_t begin = 0; begin < extent;) {
      const size_t end =
          std::min(extent, (begin == 0 ? kTileHeaderBytes : begin) + store.options_.block_bytes);
      requests.push_back(
          {op, arrays[k]->file.get(), base + begin, slot.buffers[k] + begin, end - begin, tag});
      begin = end;
    }
    absl::Status s_status = engine.Submit(requests);
    if (s_status.ok()) (op == IoOp::kWrite ? slot.writes : slot.reads) += requests.size();
    return s_status;
  };
  // Reaps completions until `ready()`; with `stop_on_error`, returns early at an I/O error.
  const auto wait = [&](auto ready, bool stop_on_error) -> absl::Status {
    while (!ready()) {
      if (stop_on_error && !io_error.ok()) return io_error;
      if (engine.outstanding() == 0) {
        return absl::InternalError("tile stream: waiting on I/O the engine does not hold");
      }
      done.clear();
      const absl::Time start = absl::Now();
      absl::Status s = engine.Reap(store.options_.io_timeout, &done);
      counters.blocked += absl::Now() - start;
      if (!s.ok()) return s;
      for (const IoCompletion& c : done) {
        Slot& slot = slots[(c.tag & ~kWriteBit) / n_arrays];
        (c.op == IoOp::kWrite ? slot.writes : slot.reads) -= 1;
        if (!c.status.ok()) {
          if (io_error.ok()) io_error = c.status;
        } else {
          (c.op == IoOp::kWrite ? counters.bytes_written : counters.bytes_read) += c.bytes;
        }
      }
    }
    return stop_on_error ? io_error : absl::OkStatus();
  };
  // Reads slot `s`'s tile of every array that fn reads and that lives on disk.
  const auto start_reads = [&](size_t s) -> absl::Status {
    for (size_t k = 0; k < n_arrays; ++k) {
      if (arrays[k]->tier != Tier::kDisk || arrays_[k].access == StreamAccess::kWriteOnly) continue;
      if (absl::Status st = submit(s, k, IoOp::kRead); !st.ok()) return st;
    }
    return absl::OkStatus();
  };
  // Verifies what start_reads read, and hands fn the tile.
  const auto process = [&](size_t s) -> absl::Status {
    Slot& slot = slots[s];
    std::vector<float*> data(n_arrays);
    for (size_t k = 0; k < n_arrays; ++k) {
      if (arrays[k]->tier != Tier::kDisk) {
        data[k] = arrays[k]->memory.data() + slot.tile * store.tile_floats_;
        continue;
      }
      data[k] = reinterpret_cast<float*>(slot.buffers[k] + kTileHeaderBytes);
      if (arrays_[k].access == StreamAccess::kWriteOnly) continue;
      const internal::TilePlace place{arrays[k]->name, &arrays[k]->file->path(),
                                      store.TileOffset(slot.tile)};
      absl::Status st = internal::VerifyTile(slot.buffers[k], tile_id(k, slot.tile),
                                             arrays[k]->checksums[slot.tile], place);
      if (!st.ok()) return st;
    }
    return fn(StreamTile{slot.tile, slot.tile * store.tile_floats_, tile_count(slot.tile), data});
  };
  // Seals and writes back slot `s`'s tile of every disk array fn may have changed.
  const auto start_writes = [&](size_t s) -> absl::Status {
    for (size_t k = 0; k < n_arrays; ++k) {
      if (arrays[k]->tier != Tier::kDisk || arrays_[k].access == StreamAccess::kReadOnly) continue;
      const size_t tile = slots[s].tile;
      arrays[k]->checksums[tile] = internal::SealTile(slots[s].buffers[k], tile_id(k, tile));
      if (absl::Status st = submit(s, k, IoOp::kWrite); !st.ok()) return st;
    }
    return absl::OkStatus();
  };

  absl::Status status;
  size_t next_read = 0;
  for (size_t tile = 0; tile < tiles && status.ok(); ++tile) {
    // Keep reads in flight up to `prefetch` tiles ahead; a slot is reused once its write is done.
    while (status.ok() && next_read < tiles && next_read <= tile + prefetch) {
      const size_t s = next_read % slots.size();
      status = wait([&] { return slots[s].writes == 0; }, true);
      if (!status.ok()) break;
      slots[s].tile = next_read++;
      status = start_reads(s);
    }
    if (!status.ok()) break;
    const size_t s = tile % slots.size();
    status = wait([&] { return slots[s].reads == 0; }, true);
    if (status.ok()) status = process(s);
    if (status.ok()) status = start_writes(s);
  }
  absl::Status drained = wait([&] { return engine.outstanding() == 0; }, false);
  if (!drained.ok()) {
    store.broken_ = absl::Status(drained.code(), absl::StrCat("tiered store broken: I/O may be in "
                                                              "flight after: ",
                                                              drained.message()));
  }
  if (status.ok()) status = drained.ok() ? io_error : drained;
  return status;
}

}  // namespace weft::offload
