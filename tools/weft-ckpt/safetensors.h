// Writing a checkpoint's full tensors as a safetensors file (the format of Hugging Face's
// `safetensors`, which torch, numpy and JAX load): an 8-byte little-endian header length N, N
// bytes of JSON header naming every tensor's dtype, shape and [begin, end) byte offsets into the
// data, padded with spaces to a multiple of 8, then the data, tensors back to back in the order
// given.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "weft/shard/checkpoint.h"

namespace weft::ckpt {

// Array `array` of the checkpoint's tensor `tensor`, stored under `name`.
struct ExportedTensor {
  std::string name;
  int tensor = 0;
  int array = 0;
};

// Writes `tensors`, read range by range from `reader` (memory stays bounded whatever their size),
// and `metadata` (the header's "__metadata__" string pairs) to `path` through `path`.tmp, which is
// fsynced and renamed over `path`: `path` is never a partial file. Errors: a name used twice, I/O
// failures (naming the file), read failures from the checkpoint.
absl::Status WriteSafetensors(const shard::CheckpointReader& reader,
                              const std::vector<ExportedTensor>& tensors,
                              const std::vector<std::pair<std::string, std::string>>& metadata,
                              const std::string& path);

}  // namespace weft::ckpt
