// The header in front of each disk tile: what the tile claims to be, and its data's checksum.
//
// Layout (little-endian uint64 words at the start of a kTileHeaderBytes block; the rest zero):
//   magic "WEFTTILE", array key (Fnv1a of the name), tile index, element count,
//   Checksum64 of the count * 4 data bytes, Checksum64 of the five words before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::offload::internal {

// Which tile a header belongs to.
struct TileId {
  uint64_t array_key = 0;
  uint64_t index = 0;
  uint64_t count = 0;  // elements
};

// Where a tile lives, for error messages.
struct TilePlace {
  absl::string_view array;
  const std::string* file = nullptr;
  uint64_t offset = 0;
};

// Writes the header for `id` at `slot`, whose data (id.count floats) follows the header; returns
// the data's checksum.
uint64_t SealTile(std::byte* slot, const TileId& id);
// Checks the header at `slot` against `id` and `expected_checksum` and the data after it against
// the header: DataLoss naming the array, tile, file and offset, and what differs.
absl::Status VerifyTile(const std::byte* slot, const TileId& id, uint64_t expected_checksum,
                        const TilePlace& place);

}  // namespace weft::offload::internal
