#include "weft/comm/compressed_all_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "weft/kernels/convert.h"
#include "weft/kernels/precision.h"

namespace weft {

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

absl::StatusOr<std::unique_ptr<CompressedAllReduce>> CompressedAllReduce::Create(
    Communicator* comm, size_t count, const CompressionOptions& options) {
  if (count == 0 || options.block == 0 || !(options.topk_ratio > 0 && options.topk_ratio <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CompressedAllReduce: count (", count, ") and block (", options.block,
                     ") must be positive and topk_ratio (", options.topk_ratio, ") in (0, 1]"));
  }
  return std::unique_ptr<CompressedAllReduce>(new CompressedAllReduce(comm, count, options));
}

CompressedAllReduce::CompressedAllReduce(Communicator* comm, size_t count,
                                         const CompressionOptions& options)
    : comm_(comm), count_(count), options_(options), ranks_(comm->size()) {
  const size_t n = static_cast<size_t>(ranks_);
  chunk_ = (count + n - 1) / n;
  k_ = std::min(count, static_cast<size_t>(std::ceil(options.topk_ratio * count)));
  const bool feedback = options.codec != Codec::kFloat16 && options.codec != Codec::kBFloat16;
  if (options.codec == Codec::kTopK) {
    worker_error_.assign(count, 0.0f);
    send_.resize(TopKEncodedBytes(k_));
    recv_.resize(n * send_.size());
    return;
  }
  staged_.assign(n * chunk_, 0.0f);
  if (feedback) {
    worker_error_.assign(n * chunk_, 0.0f);
    server_error_.assign(chunk_, 0.0f);
  }
  sum_.resize(chunk_);
  const size_t bytes = EncodedBytes(chunk_);
  send_.resize(n * bytes);
  recv_.resize(n * bytes);
  encoded_.resize(bytes);
  gathered_.resize(n * bytes);
}

size_t CompressedAllReduce::EncodedBytes(size_t n) const {
  switch (options_.codec) {
    case Codec::kInt8:
      return Int8EncodedBytes(n, options_.block);
    case Codec::kSign:
      return SignEncodedBytes(n, options_.block);
    case Codec::kTopK:
      return TopKEncodedBytes(k_);
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  return n * sizeof(uint16_t);
}

absl::StatusOr<size_t> CompressedAllReduce::Encode(const float* x, float* error, size_t n,
                                                   uint8_t* out) {
  switch (options_.codec) {
    case Codec::kInt8:
      return EncodeInt8WithFeedback(x, error, n, out, options_.block);
    case Codec::kSign:
      return EncodeSignWithFeedback(x, error, n, out, options_.block);
    case Codec::kTopK:
      return EncodeTopKWithFeedback(x, error, n, k_, reinterpret_cast<TopKEntry*>(out));
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  const size_t bad = AllFinite(x, n) ? 0 : 1;
  narrow_.resize(n);
  Narrow(options_.codec == Codec::kBFloat16 ? Precision::kBFloat16 : Precision::kFloat16, x,
         narrow_.data(), n);
  std::memcpy(out, narrow_.data(), n * sizeof(uint16_t));
  return bad;
}

absl::Status CompressedAllReduce::DecodeAdd(const uint8_t* in, size_t n, float* out) {
  switch (options_.codec) {
    case Codec::kInt8:
      return DecodeAddInt8(in, n, out, options_.block);
    case Codec::kSign:
      return DecodeAddSign(in, n, out, options_.block);
    case Codec::kTopK:
      return DecodeAddTopK(reinterpret_cast<const TopKEntry*>(in), k_, n, out);
    case Codec::kFloat16:
    case Codec::kBFloat16:
      break;
  }
  narrow_.resize(n);
  wide_.resize(n);
  std::memcpy(narrow_.data(), in, n * sizeof(uint16_t));
  Widen(options_.codec == Codec::kBFloat16 ? Precision::kBFloat16 : Precision::kFloat16,
        narrow_.data(), wide_.data(), n);
  for (size_t i = 0; i < n; ++i) out[i] += wide_[i];
  return absl::OkStatus();
}

absl::Status CompressedAllReduce::Wait(Work work, const char* what) {
  absl::Status s = work.Wait(options_.timeout);
  if (s.ok()) return s;
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
  const size_t n = static_cast<size_t>(ranks_), bytes = EncodedBytes(chunk_);
  // The padding of the last chunk is zeros (the last call's output is still there).
  std::copy(data, data + count_, staged_.begin());
  std::fill(staged_.begin() + count_, staged_.end(), 0.0f);
  size_t bad = 0;
  for (size_t c = 0; c < n; ++c) {
    float* error = worker_error_.empty() ? nullptr : worker_error_.data() + c * chunk_;
    absl::StatusOr<size_t> b =
        Encode(staged_.data() + c * chunk_, error, chunk_, send_.data() + c * bytes);
    if (!b.ok()) return b.status();
    bad += *b;
  }
  if (absl::Status s = Wait(comm_->AllToAll(send_.data(), recv_.data(), bytes, DataType::kUint8),
                            "all-to-all of the encoded chunks");
      !s.ok()) {
    return s;
  }
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (size_t r = 0; r < n; ++r) {
    if (absl::Status s = DecodeAdd(recv_.data() + r * bytes, chunk_, sum_.data()); !s.ok()) {
      return s;
    }
  }
  Scale(sum_.data(), chunk_, 1.0f / static_cast<float>(ranks_));
  absl::StatusOr<size_t> b = Encode(
      sum_.data(), server_error_.empty() ? nullptr : server_error_.data(), chunk_, encoded_.data());
  if (!b.ok()) return b.status();
  if (absl::Status s =
          Wait(comm_->AllGather(encoded_.data(), gathered_.data(), bytes, DataType::kUint8),
               "all-gather of the encoded averages");
      !s.ok()) {
    return s;
  }
  std::fill(staged_.begin(), staged_.end(), 0.0f);
  for (size_t c = 0; c < n; ++c) {
    if (absl::Status s =
            DecodeAdd(gathered_.data() + c * bytes, chunk_, staged_.data() + c * chunk_);
        !s.ok()) {
      return s;
    }
  }
  std::copy(staged_.begin(), staged_.begin() + count_, data);
  wire_bytes_ += 2 * (n - 1) * bytes;
  if (bad > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", comm_->rank(), ": CompressedAllReduce call ", runs_, ": ", bad,
                     " infinite or NaN gradient elements were sent as zeros"));
  }
  return absl::OkStatus();
}

absl::Status CompressedAllReduce::RunTopK(float* data) {
  const size_t n = static_cast<size_t>(ranks_), bytes = send_.size();
  absl::StatusOr<size_t> bad = Encode(data, worker_error_.data(), count_, send_.data());
  if (!bad.ok()) return bad.status();
  if (absl::Status s = Wait(comm_->AllGather(send_.data(), recv_.data(), bytes, DataType::kUint8),
                            "all-gather of the top-k entries");
      !s.ok()) {
    return s;
  }
  std::fill(data, data + count_, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    if (absl::Status s = DecodeAdd(recv_.data() + r * bytes, count_, data); !s.ok()) return s;
  }
  Scale(data, count_, 1.0f / static_cast<float>(ranks_));
  wire_bytes_ += (n - 1) * bytes;
  if (*bad > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", comm_->rank(), ": CompressedAllReduce call ", runs_, ": ", *bad,
                     " infinite or NaN gradient elements were sent as zeros"));
  }
  return absl::OkStatus();
}

std::vector<float> CompressedAllReduce::errors() const {
  std::vector<float> all = worker_error_;
  all.insert(all.end(), server_error_.begin(), server_error_.end());
  return all;
}

absl::Status CompressedAllReduce::RestoreErrors(const std::vector<float>& errors) {
  if (errors.size() != worker_error_.size() + server_error_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CompressedAllReduce: ", errors.size(), " error values saved, ",
        worker_error_.size() + server_error_.size(), " expected (", Name(options_.codec), ")"));
  }
  std::copy(errors.begin(), errors.begin() + worker_error_.size(), worker_error_.begin());
  std::copy(errors.begin() + worker_error_.size(), errors.end(), server_error_.begin());
  return absl::OkStatus();
}

}  // namespace weft
