#include "tile_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "weft/kernels/hash.h"
#include "weft/offload/tiered_store.h"

namespace weft::offload::internal {
namespace {

constexpr uint64_t kMagic = 0x454c495454464557ULL;  // "WEFTTILE" in little-endian bytes
constexpr size_t kWords = 6;
static_assert(kWords * sizeof(uint64_t) <= kTileHeaderBytes);

}  // namespace

uint64_t SealTile(std::byte* slot, const TileId& id) {
  const uint64_t data_sum = Checksum64(slot + kTileHeaderBytes, id.count * sizeof(float));
  uint64_t words[kWords] = {kMagic, id.array_key, id.index, id.count, data_sum, 0};
  words[kWords - 1] = Checksum64(words, (kWords - 1) * sizeof(uint64_t));
  std::memset(slot, 0, kTileHeaderBytes);
  std::memcpy(slot, words, sizeof(words));
  return data_sum;
}

absl::Status VerifyTile(const std::byte* slot, const TileId& id, uint64_t expected_checksum,
                        const TilePlace& place) {
  uint64_t words[kWords];
  std::memcpy(words, slot, sizeof(words));
  const uint64_t data_sum = Checksum64(slot + kTileHeaderBytes, id.count * sizeof(float));
  std::string problem;
  if (words[0] != kMagic) {
    problem = "no tile header";
  } else if (words[kWords - 1] != Checksum64(words, (kWords - 1) * sizeof(uint64_t))) {
    problem = "header checksum mismatch";
  } else if (words[1] != id.array_key || words[2] != id.index || words[3] != id.count) {
    problem = absl::StrCat("header names tile ", words[2], " of ", words[3],
                           " elements of another array or place");
  } else if (words[4] != expected_checksum) {
    problem = "stale tile (not the one last written)";
  } else if (data_sum != expected_checksum) {
    problem = absl::StrCat("data checksum ", data_sum, " != ", expected_checksum);
  } else {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat("array '", place.array, "' tile ", id.index,
                                          " at offset ", place.offset, " of ", *place.file, ": ",
                                          problem));
}

}  // namespace weft::offload::internal
