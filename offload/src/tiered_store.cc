#include "weft/offload/tiered_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "weft/kernels/hash.h"
#include "weft/offload/tile_stream.h"

namespace weft::offload {
namespace {

// A file name for array `name`: its characters that are safe in a path, and its hash (unique).
std::string FileName(absl::string_view name, uint64_t key) {
  std::string safe(name.substr(0, 64));
  for (char& c : safe) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return absl::StrFormat("%s-%016x.tiles", safe, key);
}

}  // namespace

absl::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kMemory:
      return "memory";
    case Tier::kPinnedHost:
      return "pinned_host";
    case Tier::kDisk:
      return "disk";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<TieredStore>> TieredStore::Create(TieredStoreOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("tiered store: no directory given");
  if (options.block_bytes == 0 || options.block_bytes % kIoAlignment != 0 ||
      options.tile_blocks == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tiered store: block of ", options.block_bytes, " bytes (needs a multiple of ",
        kIoAlignment, ") and ", options.tile_blocks, " blocks per tile (needs at least 1)"));
  }
  std::error_code error;
  const bool existed = std::filesystem::is_directory(options.dir, error);
  if (!existed && !std::filesystem::create_directories(options.dir, error) && error) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", options.dir, ": ", error.message()));
  }
  absl::StatusOr<std::unique_ptr<IoEngine>> engine = MakeIoEngine(options.io);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<TieredStore>(
      new TieredStore(std::move(options), *std::move(engine), !existed));
}

TieredStore::TieredStore(TieredStoreOptions options, std::unique_ptr<IoEngine> engine,
                         bool made_dir)
    : options_(std::move(options)),
      tile_bytes_(options_.block_bytes * options_.tile_blocks),
      tile_floats_(tile_bytes_ / sizeof(float)),
      made_dir_(made_dir),
      engine_(std::move(engine)) {}

TieredStore::~TieredStore() {
  engine_.reset();  // ends in-flight I/O before the files and buffers it uses go
  arrays_.clear();
  if (made_dir_) ::rmdir(options_.dir.c_str());
}

absl::StatusOr<TieredStore::Array*> TieredStore::Find(absl::string_view name) const {
  const auto it = arrays_.find(name);
  if (it == arrays_.end()) {
    return absl::NotFoundError(absl::StrCat("tiered store: no array '", name, "'"));
  }
  return it->second.get();
}

bool TieredStore::Contains(absl::string_view name) const { return arrays_.contains(name); }

absl::StatusOr<size_t> TieredStore::Size(absl::string_view name) const {
  absl::StatusOr<Array*> array = Find(name);
  if (!array.ok()) return array.status();
  return (*array)->size;
}

absl::StatusOr<Tier> TieredStore::TierOf(absl::string_view name) const {
  absl::StatusOr<Array*> array = Find(name);
  if (!array.ok()) return array.status();
  return (*array)->tier;
}

absl::StatusOr<TieredStore::Array*> TieredStore::FindIn(absl::string_view name, Tier tier) const {
  absl::StatusOr<Array*> array = Find(name);
  if (array.ok() && (*array)->tier != tier) {
    return absl::FailedPreconditionError(absl::StrCat(
        "array '", name, "' is in tier ", TierName((*array)->tier), ", not ", TierName(tier)));
  }
  return array;
}

absl::StatusOr<float*> TieredStore::MemoryData(absl::string_view name) {
  absl::StatusOr<Array*> array = FindIn(name, Tier::kMemory);
  if (!array.ok()) return array.status();
  return (*array)->memory.data();
}

absl::StatusOr<const IoFile*> TieredStore::FileOf(absl::string_view name) const {
  absl::StatusOr<Array*> array = FindIn(name, Tier::kDisk);
  if (!array.ok()) return array.status();
  return (*array)->file.get();
}

absl::Status TieredStore::Add(absl::string_view name, Tier tier, size_t size) {
  return AddArray(name, tier, size, nullptr);
}

absl::Status TieredStore::Add(absl::string_view name, Tier tier, absl::Span<const float> initial) {
  return AddArray(name, tier, initial.size(), initial.data());
}

absl::Status TieredStore::AddArray(absl::string_view name, Tier tier, size_t size,
                                   const float* initial) {
  if (!broken_.ok()) return broken_;
  if (arrays_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("tiered store: array '", name, "' exists"));
  }
  if (tier == Tier::kPinnedHost) {
    return absl::UnimplementedError(
        absl::StrCat("array '", name,
                     "': tier pinned_host needs a GPU build (CUDA), and this build has none; "
                     "place it in memory or disk"));
  }
  auto array = std::make_unique<Array>();
  array->name = std::string(name);
  array->key = Fnv1a(name);
  array->tier = tier;
  array->size = size;
  if (tier == Tier::kMemory) {
    array->memory.assign(size, 0.0f);
    if (initial != nullptr) std::copy(initial, initial + size, array->memory.begin());
    arrays_.emplace(array->name, std::move(array));
    return absl::OkStatus();
  }
  const std::string path = absl::StrCat(options_.dir, "/", FileName(name, array->key));
  absl::StatusOr<std::unique_ptr<IoFile>> file =
      IoFile::Create(path, options_.direct_io, options_.open_file);
  if (!file.ok()) return file.status();
  array->file = *std::move(file);
  io_mode_ = array->file->mode();
  const size_t tiles = TileCount(size);
  array->checksums.assign(tiles, 0);
  if (tiles > 0) {
    const size_t tail = size - (tiles - 1) * tile_floats_;
    const uint64_t bytes = TileOffset(tiles - 1) + kTileHeaderBytes + AlignUp(tail * sizeof(float));
    if (absl::Status s = array->file->Reserve(bytes); !s.ok()) return s;
  }
  arrays_.emplace(array->name, std::move(array));
  // Every tile is written once, so that every later read finds a sealed tile.
  TileStream fill(this, {{std::string(name), StreamAccess::kWriteOnly}});
  absl::Status s = fill.Run([&](const StreamTile& tile) {
    float* out = tile.data[0];
    if (initial == nullptr) {
      std::fill(out, out + tile.count, 0.0f);
    } else {
      std::copy(initial + tile.offset, initial + tile.offset + tile.count, out);
    }
    return absl::OkStatus();
  });
  if (!s.ok() && broken_.ok()) arrays_.erase(name);
  return s;
}

absl::StatusOr<TieredStore::Array*> TieredStore::FindSized(absl::string_view name, size_t size,
                                                           absl::string_view what) const {
  absl::StatusOr<Array*> array = Find(name);
  if (array.ok() && (*array)->size != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of ", size, " elements: array '", name, "' has ", (*array)->size));
  }
  return array;
}

absl::Status TieredStore::Write(absl::string_view name, absl::Span<const float> data) {
  absl::StatusOr<Array*> array = FindSized(name, data.size(), "write");
  if (!array.ok()) return array.status();
  if ((*array)->tier == Tier::kMemory) {
    std::copy(data.begin(), data.end(), (*array)->memory.begin());
    return absl::OkStatus();
  }
  TileStream stream(this, {{std::string(name), StreamAccess::kWriteOnly}});
  return stream.Run([&](const StreamTile& tile) {
    std::copy_n(data.data() + tile.offset, tile.count, tile.data[0]);
    return absl::OkStatus();
  });
}

absl::Status TieredStore::Read(absl::string_view name, absl::Span<float> out) {
  absl::StatusOr<Array*> array = FindSized(name, out.size(), "read");
  if (!array.ok()) return array.status();
  if ((*array)->tier == Tier::kMemory) {
    std::copy((*array)->memory.begin(), (*array)->memory.end(), out.begin());
    return absl::OkStatus();
  }
  TileStream stream(this, {{std::string(name), StreamAccess::kReadOnly}});
  return stream.Run([&](const StreamTile& tile) {
    std::copy_n(tile.data[0], tile.count, out.data() + tile.offset);
    return absl::OkStatus();
  });
}

std::vector<std::byte*> TieredStore::Staging(size_t count) {
  while (staging_.size() < count) staging_.emplace_back(kTileHeaderBytes + tile_bytes_);
  std::vector<std::byte*> buffers(count);
  for (size_t i = 0; i < count; ++i) buffers[i] = staging_[i].data();
  return buffers;
}

}  // namespace weft::offload
