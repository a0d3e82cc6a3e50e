#include "chunk_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "weft/kernels/precision.h"

namespace weft {
namespace {

Precision HalfOf(Codec codec) {
  return codec == Codec::kBFloat16 ? Precision::kBFloat16 : Precision::kFloat16;
}

}  // namespace

const char* Name(Codec codec) {
  switch (codec) {
    case Codec::kFloat16:
      return "fp16";
    case Codec::kBFloat16:
      return "bf16";
    case Codec::kInt8:
      return "int8";
    case Codec::kSign:
      return "onebit";
    case Codec::kTopK:
      return "topk";
  }
  return "?";
}

std::optional<Codec> ParseCodec(std::string_view name) {
  for (Codec c : {Codec::kFloat16, Codec::kBFloat16, Codec::kInt8, Codec::kSign, Codec::kTopK}) {
    if (name == Name(c)) return c;
  }
  return std::nullopt;
}

absl::Status CheckCompressionArguments(size_t count, const CompressionOptions& options) {
  if (count > 0 && options.block > 0 && options.topk_ratio > 0 && options.topk_ratio <= 1) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("compressed collective: count (", count, ") and block (", options.block,
                   ") must be positive and topk_ratio (", options.topk_ratio, ") in (0, 1]"));
}

ChunkCodec::ChunkCodec(const CompressionOptions& options, size_t n)
    : options_(options),
      n_(n),
      k_(std::min(n, static_cast<size_t>(std::ceil(options.topk_ratio * static_cast<double>(n))))) {
}

bool ChunkCodec::has_feedback() const {
  return options_.codec != Codec::kFloat16 && options_.codec != Codec::kBFloat16;
}

size_t ChunkCodec::bytes() const {
  switch (options_.codec) {
    case Codec::kInt8:
      return Int8EncodedBytes(n_, options_.block);
    case Codec::kSign:
      return SignEncodedBytes(n_, options_.block);
    case Codec::kTopK:
      return TopKEncodedBytes(k_);
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  return n_ * sizeof(uint16_t);
}

absl::StatusOr<size_t> ChunkCodec::Encode(const float* x, float* error, uint8_t* out) {
  switch (options_.codec) {
    case Codec::kInt8:
      return EncodeInt8WithFeedback(x, error, n_, out, options_.block);
    case Codec::kSign:
      return EncodeSignWithFeedback(x, error, n_, out, options_.block);
    case Codec::kTopK:
      return EncodeTopKWithFeedback(x, error, n_, k_, reinterpret_cast<TopKEntry*>(out));
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  const size_t bad = AllFinite(x, n_) ? 0 : 1;
  narrow_.resize(n_);
  Narrow(HalfOf(options_.codec), x, narrow_.data(), n_);
  std::memcpy(out, narrow_.data(), n_ * sizeof(uint16_t));
  return bad;
}

absl::Status ChunkCodec::DecodeAdd(const uint8_t* in, float* out) {
  switch (options_.codec) {
    case Codec::kInt8:
      return DecodeAddInt8(in, n_, out, options_.block);
    case Codec::kSign:
      return DecodeAddSign(in, n_, out, options_.block);
    case Codec::kTopK:
      return DecodeAddTopK(reinterpret_cast<const TopKEntry*>(in), k_, n_, out);
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  narrow_.resize(n_);
  wide_.resize(n_);
  std::memcpy(narrow_.data(), in, n_ * sizeof(uint16_t));
  Widen(HalfOf(options_.codec), narrow_.data(), wide_.data(), n_);
  for (size_t i = 0; i < n_; ++i) out[i] += wide_[i];
  return absl::OkStatus();
}

}  // namespace weft
