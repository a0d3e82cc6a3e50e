#include "weft/comm/compressed_reduce_scatter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "chunk_codec.h"
#include "weft/kernels/precision.h"

namespace weft {

absl::StatusOr<std::unique_ptr<CompressedReduceScatter>> CompressedReduceScatter::Create(
    Communicator* comm, size_t count, const CompressionOptions& options) {
  if (count == 0 || options.block == 0 || !(options.topk_ratio > 0 && options.topk_ratio <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed collective: count (", count, ") and block (", options.block,
                     ") must be positive and topk_ratio (", options.topk_ratio, ") in (0, 1]"));
  }
  return std::unique_ptr<CompressedReduceScatter>(
      new CompressedReduceScatter(comm, count, options));
}

CompressedReduceScatter::CompressedReduceScatter(Communicator* comm, size_t count,
                                                 const CompressionOptions& options)
    : comm_(comm), count_(count), options_(options), ranks_(comm->size()) {
  const size_t n = static_cast<size_t>(ranks_);
  chunk_ = (count + n - 1) / n;
  codec_ = std::make_unique<ChunkCodec>(options, chunk_);
  staged_.assign(n * chunk_, 0.0f);
  if (codec_->has_feedback()) worker_error_.assign(n * chunk_, 0.0f);
  send_.resize(n * codec_->bytes());
  recv_.resize(n * codec_->bytes());
}

CompressedReduceScatter::~CompressedReduceScatter() = default;

absl::Status CompressedReduceScatter::Run(const float* data, float* slice) {
  ++runs_;
  const size_t n = static_cast<size_t>(ranks_), bytes = codec_->bytes();
  uncompressed_bytes_ += count_ * sizeof(float) * (n - 1) / n;
  // The padding of the last chunk stays zero: only [0, count) is ever written.
  std::copy(data, data + count_, staged_.begin());
  size_t bad = 0;
  for (size_t c = 0; c < n; ++c) {
    float* error = worker_error_.empty() ? nullptr : worker_error_.data() + c * chunk_;
    absl::StatusOr<size_t> b =
        codec_->Encode(staged_.data() + c * chunk_, error, send_.data() + c * bytes);
    if (!b.ok()) return b.status();
    bad += *b;
  }
  if (absl::Status s = comm_->AllToAll(send_.data(), recv_.data(), bytes, DataType::kUint8)
                           .Wait(options_.timeout);
      !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("rank ", comm_->rank(), ": compressed reduce-scatter (", Name(options_.codec),
                     ") call ", runs_, ": all-to-all of the encoded chunks: ", s.message()));
  }
  std::fill(slice, slice + chunk_, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    if (absl::Status s = codec_->DecodeAdd(recv_.data() + r * bytes, slice); !s.ok()) return s;
  }
  Scale(slice, chunk_, 1.0f / static_cast<float>(ranks_));
  wire_bytes_ += (n - 1) * bytes;
  if (bad > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", comm_->rank(), ": compressed reduce-scatter (", Name(options_.codec), ") call ",
        runs_, ": ", bad, " infinite or NaN gradient elements were sent as zeros"));
  }
  return absl::OkStatus();
}

absl::Status CompressedReduceScatter::RestoreErrors(const std::vector<float>& errors) {
  if (errors.size() != worker_error_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("compressed reduce-scatter: ", errors.size(),
                                                   " error values saved, ", worker_error_.size(),
                                                   " expected (", Name(options_.codec), ")"));
  }
  std::copy(errors.begin(), errors.end(), worker_error_.begin());
  return absl::OkStatus();
}

}  // namespace weft
