// Gradient compression's vocabulary: the codecs a compressed collective can put on the wire and
// their options. The collectives are compressed_reduce_scatter.h and compressed_all_reduce.h; the
// codecs themselves, with their error bounds and byte layouts, are weft/kernels/codec.h.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/time/time.h"
#include "weft/kernels/codec.h"

namespace weft {

// kFloat16 / kBFloat16: a cast, round to nearest-even, no state. kInt8: a scale per block. kSign:
// one bit per element and a scale per block. kTopK: the largest entries as (index, value) pairs.
// The last three keep error feedback.
enum class Codec { kFloat16, kBFloat16, kInt8, kSign, kTopK };

// "fp16", "bf16", "int8", "onebit", "topk" (the names the trainer's compression= and the perf
// tools' --compression take).
const char* Name(Codec codec);
std::optional<Codec> ParseCodec(std::string_view name);

// How a compressed reduce-scatter moves its chunks (compressed_reduce_scatter.h): kAuto lets
// the communicator's cost model choose between the direct all-to-all and the ring.
enum class ScatterPath { kAuto, kDirect, kRing };

struct CompressionOptions {
  Codec codec = Codec::kInt8;
  size_t block = kCodecDefaultBlock;  // int8 and sign: elements per scale
  double topk_ratio = 0.01;           // top-k: the share of elements sent, in (0, 1]
  ScatterPath scatter = ScatterPath::kAuto;
  absl::Duration timeout = absl::Seconds(300);
};

}  // namespace weft
