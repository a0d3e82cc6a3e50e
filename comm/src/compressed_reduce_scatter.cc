#include "weft/comm/compressed_reduce_scatter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "chunk_codec.h"
#include "weft/kernels/precision.h"

namespace weft {

absl::StatusOr<std::unique_ptr<CompressedReduceScatter>> CompressedReduceScatter::Create(
    Communicator* comm, size_t count, const CompressionOptions& options) {
  if (absl::Status s = CheckCompressionArguments(count, options); !s.ok()) return s;
  return std::unique_ptr<CompressedReduceScatter>(
      new CompressedReduceScatter(comm, count, options));
}

namespace {

// The ring's messages: apart from any point-to-point traffic of the communicator's users.
constexpr int kRingTag = 0x57c5;

}  // namespace

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
  // On two ranks both paths are one exchange, and inside one node no link is shared by the
  // all-to-all's flows: direct then, which encodes no partial sums.
  if (options.scatter == ScatterPath::kRing) {
    ring_ = n > 1;
  } else if (options.scatter == ScatterPath::kAuto && n > 2 && comm->NodeRanks().size() < n) {
    const size_t bytes = n * codec_->bytes();
    const double direct = comm->PredictedSeconds("all_to_all", bytes);
    const double ring = comm->PredictedSeconds("all_gather", bytes, "ring");
    ring_ = direct >= 0 && ring >= 0 && ring < direct;
  }
  if (ring_) partial_.resize(chunk_);
}

CompressedReduceScatter::~CompressedReduceScatter() = default;

absl::Status CompressedReduceScatter::Failed(const absl::Status& s, const std::string& what) const {
  return absl::Status(s.code(),
                      absl::StrCat("rank ", comm_->rank(), ": compressed reduce-scatter (",
                                   Name(options_.codec), ", ", ring_ ? "ring" : "direct", ") call ",
                                   runs_, ": ", what, ": ", s.message()));
}

absl::Status CompressedReduceScatter::Run(const float* data, float* slice) {
  ++runs_;
  const size_t n = static_cast<size_t>(ranks_);
  uncompressed_bytes_ += count_ * sizeof(float) * (n - 1) / n;
  // The padding of the last chunk stays zero: only [0, count) is ever written.
  std::copy(data, data + count_, staged_.begin());
  absl::StatusOr<size_t> bad = ring_ ? RunRing(slice) : RunDirect(slice);
  if (!bad.ok()) return bad.status();
  Scale(slice, chunk_, 1.0f / static_cast<float>(ranks_));
  wire_bytes_ += (n - 1) * codec_->bytes();
  if (*bad > 0) {
    return Failed(absl::FailedPreconditionError(
                      absl::StrCat(*bad, " infinite or NaN gradient elements were sent as zeros")),
                  "encoding");
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CompressedReduceScatter::RunDirect(float* slice) {
  const size_t n = static_cast<size_t>(ranks_), bytes = codec_->bytes();
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
    return Failed(s, "all-to-all of the encoded chunks");
  }
  std::fill(slice, slice + chunk_, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    if (absl::Status s = codec_->DecodeAdd(recv_.data() + r * bytes, slice); !s.ok()) return s;
  }
  return bad;
}

absl::StatusOr<size_t> CompressedReduceScatter::RunRing(float* slice) {
  const int n = ranks_, r = comm_->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t bytes = codec_->bytes();
  size_t bad = 0;
  // Encodes `partial` (chunk c's sum so far) with chunk c's error into the send buffer.
  auto encode = [&](const float* partial, int c) -> absl::Status {
    float* error = worker_error_.empty() ? nullptr : worker_error_.data() + c * chunk_;
    absl::StatusOr<size_t> b = codec_->Encode(partial, error, send_.data());
    if (!b.ok()) return b.status();
    bad += *b;
    return absl::OkStatus();
  };
  // Decodes what arrived into `out` and adds this rank's own chunk c.
  auto receive = [&](float* out, int c) -> absl::Status {
    std::fill(out, out + chunk_, 0.0f);
    if (absl::Status s = codec_->DecodeAdd(recv_.data(), out); !s.ok()) return s;
    const float* own = staged_.data() + static_cast<size_t>(c) * chunk_;
    for (size_t i = 0; i < chunk_; ++i) out[i] += own[i];
    return absl::OkStatus();
  };
  // This rank's own chunk is added, never encoded: its non-finite elements become zeros here,
  // as an encoder would send them.
  float* own = staged_.data() + static_cast<size_t>(r) * chunk_;
  for (size_t i = 0; i < chunk_; ++i) {
    if (!std::isfinite(own[i])) {
      own[i] = 0.0f;
      ++bad;
    }
  }
  if (absl::Status s = encode(staged_.data() + static_cast<size_t>(prev) * chunk_, prev); !s.ok()) {
    return s;
  }
  for (int step = 0; step < n - 1; ++step) {
    comm_->GroupStart();
    comm_->Send(send_.data(), bytes, DataType::kUint8, next, kRingTag);
    comm_->Recv(recv_.data(), bytes, DataType::kUint8, prev, kRingTag);
    if (absl::Status s = comm_->GroupEnd().Wait(options_.timeout); !s.ok()) {
      return Failed(s, absl::StrCat("ring step ", step + 1, " of ", n - 1));
    }
    const int c = ((r - 2 - step) % n + n) % n;  // the chunk whose partial sum arrived
    if (step == n - 2) {
      if (absl::Status s = receive(slice, c); !s.ok()) return s;
    } else if (absl::Status s = receive(partial_.data(), c); !s.ok()) {
      return s;
    } else if (absl::Status e = encode(partial_.data(), c); !e.ok()) {
      return e;
    }
  }
  return bad;
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
