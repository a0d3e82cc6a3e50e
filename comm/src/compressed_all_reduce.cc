#include "weft/comm/compressed_all_reduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "chunk_codec.h"
#include "weft/kernels/precision.h"

namespace weft {

absl::StatusOr<std::unique_ptr<CompressedAllReduce>> CompressedAllReduce::Create(
    Communicator* comm, size_t count, const CompressionOptions& options) {
  if (absl::Status s = CheckCompressionArguments(count, options); !s.ok()) return s;
  return std::unique_ptr<CompressedAllReduce>(new CompressedAllReduce(comm, count, options));
}

CompressedAllReduce::CompressedAllReduce(Communicator* comm, size_t count,
                                         const CompressionOptions& options)
    : comm_(comm), count_(count), options_(options), ranks_(comm->size()) {
  const size_t n = static_cast<size_t>(ranks_);
  if (options.codec == Codec::kTopK) {
    codec_ = std::make_unique<ChunkCodec>(options, count);
    error_.assign(count, 0.0f);
  } else {
    scatter_ = *CompressedReduceScatter::Create(comm, count, options);
    codec_ = std::make_unique<ChunkCodec>(options, scatter_->chunk());
    if (codec_->has_feedback()) error_.assign(scatter_->chunk(), 0.0f);
    sum_.resize(scatter_->chunk());
    staged_.resize(n * scatter_->chunk());
  }
  encoded_.resize(codec_->bytes());
  gathered_.resize(n * codec_->bytes());
}

CompressedAllReduce::~CompressedAllReduce() = default;

uint64_t CompressedAllReduce::wire_bytes() const {
  return gathered_bytes_ + (scatter_ ? scatter_->wire_bytes() : 0);
}

absl::Status CompressedAllReduce::Gather(const uint8_t* send, uint8_t* recv, size_t bytes,
                                         const char* what) {
  absl::Status s = comm_->AllGather(send, recv, bytes, DataType::kUint8).Wait(options_.timeout);
  if (s.ok()) {
    gathered_bytes_ += static_cast<uint64_t>(ranks_ - 1) * bytes;
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("rank ", comm_->rank(), ": CompressedAllReduce (",
                                             Name(options_.codec), ") call ", runs_, ": ", what,
                                             ": ", s.message()));
}

absl::Status CompressedAllReduce::Run(float* data) {
  ++runs_;
  uncompressed_bytes_ += 2 * count_ * sizeof(float) * (ranks_ - 1) / ranks_;
  return options_.codec == Codec::kTopK ? RunTopK(data) : RunChunked(data);
}

absl::Status CompressedAllReduce::RunChunked(float* data) {
  // A non-finite input completes the collectives everywhere; its status is returned at the end.
  absl::Status scattered = scatter_->Run(data, sum_.data());
  if (!scattered.ok() && !absl::IsFailedPrecondition(scattered)) return scattered;
  absl::StatusOr<size_t> b =
      codec_->Encode(sum_.data(), error_.empty() ? nullptr : error_.data(), encoded_.data());
  if (!b.ok()) return b.status();
  const size_t bytes = codec_->bytes(), chunk = scatter_->chunk();
  if (absl::Status s =
          Gather(encoded_.data(), gathered_.data(), bytes, "all-gather of the encoded averages");
      !s.ok()) {
    return s;
  }
  std::fill(staged_.begin(), staged_.end(), 0.0f);
  for (size_t c = 0; c < static_cast<size_t>(ranks_); ++c) {
    if (absl::Status s =
            codec_->DecodeAdd(gathered_.data() + c * bytes, staged_.data() + c * chunk);
        !s.ok()) {
      return s;
    }
  }
  std::copy(staged_.begin(), staged_.begin() + count_, data);
  return scattered;
}

absl::Status CompressedAllReduce::RunTopK(float* data) {
  const size_t bytes = codec_->bytes();
  absl::StatusOr<size_t> bad = codec_->Encode(data, error_.data(), encoded_.data());
  if (!bad.ok()) return bad.status();
  if (absl::Status s =
          Gather(encoded_.data(), gathered_.data(), bytes, "all-gather of the top-k entries");
      !s.ok()) {
    return s;
  }
  std::fill(data, data + count_, 0.0f);
  for (size_t r = 0; r < static_cast<size_t>(ranks_); ++r) {
    if (absl::Status s = codec_->DecodeAdd(gathered_.data() + r * bytes, data); !s.ok()) return s;
  }
  Scale(data, count_, 1.0f / static_cast<float>(ranks_));
  if (*bad > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", comm_->rank(), ": CompressedAllReduce (topk) call ", runs_, ": ",
                     *bad, " infinite or NaN gradient elements were sent as zeros"));
  }
  return absl::OkStatus();
}

std::vector<float> CompressedAllReduce::errors() const {
  std::vector<float> all = scatter_ ? scatter_->errors() : std::vector<float>();
  all.insert(all.end(), error_.begin(), error_.end());
  return all;
}

absl::Status CompressedAllReduce::RestoreErrors(const std::vector<float>& errors) {
  const size_t worker = scatter_ ? scatter_->errors().size() : 0;
  if (errors.size() != worker + error_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("CompressedAllReduce: ", errors.size(),
                                                   " error values saved, ", worker + error_.size(),
                                                   " expected (", Name(options_.codec), ")"));
  }
  if (scatter_) {
    if (absl::Status s =
            scatter_->RestoreErrors(std::vector<float>(errors.begin(), errors.begin() + worker));
        !s.ok()) {
      return s;
    }
  }
  std::copy(errors.begin() + worker, errors.end(), error_.begin());
  return absl::OkStatus();
}

}  // namespace weft
