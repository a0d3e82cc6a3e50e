#include "perf/compressed.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "chunk_codec.h"
#include "weft/kernels/precision.h"

namespace weft::perf {
namespace {

bool IsAllReduce(const Collective& collective) {
  return std::string_view(collective.name()) == "all_reduce";
}

// Encodes x[0, codec.n()) as a fresh object does (zero error feedback) and adds the decode of
// what went on the wire to out[0, codec.n()).
absl::Status SendAndAdd(ChunkCodec& codec, const float* x, float* out) {
  std::vector<float> error(codec.n(), 0.0f);
  std::vector<uint8_t> wire(codec.bytes());
  if (absl::StatusOr<size_t> bad = codec.Encode(x, error.data(), wire.data()); !bad.ok()) {
    return bad.status();
  }
  return codec.DecodeAdd(wire.data(), out);
}

// Top-k all-reduce: every rank's k largest entries of the whole array, added in rank order into
// zeros, times 1/N.
absl::StatusOr<std::vector<float>> TopKAllReduce(const CompressionOptions& options,
                                                 const TestData& data, size_t count, int ranks) {
  ChunkCodec codec(options, count);
  std::vector<float> x(count), out(count, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    data.FillInput(r, x.data(), count);
    if (absl::Status s = SendAndAdd(codec, x.data(), out.data()); !s.ok()) return s;
  }
  Scale(out.data(), count, 1.0f / static_cast<float>(ranks));
  return out;
}

// The ring's chunk `rank`: it starts at rank + 1, and every rank after it decodes the partial sum
// into zeros, adds its own chunk and (but the last, `rank` itself) encodes it again; times 1/N.
absl::StatusOr<std::vector<float>> RingChunk(const CompressionOptions& options,
                                             const TestData& data, size_t count, int rank,
                                             int ranks) {
  const size_t n = static_cast<size_t>(ranks), chunk = (count + n - 1) / n;
  ChunkCodec codec(options, chunk);
  std::vector<float> x(n * chunk, 0.0f), partial(chunk, 0.0f);
  std::vector<float> error(chunk, 0.0f);
  std::vector<uint8_t> wire(codec.bytes());
  const float* piece = x.data() + static_cast<size_t>(rank) * chunk;  // rank r's chunk `rank`
  for (int j = 1; j <= ranks; ++j) {
    const int r = (rank + j) % ranks;
    std::fill(x.begin(), x.end(), 0.0f);
    data.FillInput(r, x.data(), count);
    if (j > 1) {
      std::fill(partial.begin(), partial.end(), 0.0f);
      if (absl::Status s = codec.DecodeAdd(wire.data(), partial.data()); !s.ok()) return s;
    }
    for (size_t i = 0; i < chunk; ++i) partial[i] = j > 1 ? partial[i] + piece[i] : piece[i];
    if (r == rank) break;
    std::fill(error.begin(), error.end(), 0.0f);
    if (absl::StatusOr<size_t> bad = codec.Encode(partial.data(), error.data(), wire.data());
        !bad.ok()) {
      return bad.status();
    }
  }
  Scale(partial.data(), chunk, 1.0f / static_cast<float>(ranks));
  return partial;
}

// The chunked computation: chunk c of every rank (the array cut into N chunks of ceil(count / N),
// the last padded with zeros), encoded, decoded and added in rank order into zeros, times 1/N (or
// the ring's chain for chunk c); for all-reduce each averaged chunk is encoded again and decoded
// into zeros. Reduce-scatter needs only chunk `rank`.
absl::StatusOr<std::vector<float>> Chunked(bool all_reduce, bool ring,
                                           const CompressionOptions& options, const TestData& data,
                                           size_t count, int rank, int ranks) {
  const size_t n = static_cast<size_t>(ranks), chunk = (count + n - 1) / n;
  const size_t first = all_reduce ? 0 : static_cast<size_t>(rank);
  const size_t last = all_reduce ? n : first + 1;
  ChunkCodec codec(options, chunk);
  std::vector<float> x(n * chunk, 0.0f), sums(n * chunk, 0.0f);
  if (ring) {
    for (size_t c = first; c < last; ++c) {
      absl::StatusOr<std::vector<float>> sum =
          RingChunk(options, data, count, static_cast<int>(c), ranks);
      if (!sum.ok()) return sum.status();
      std::copy(sum->begin(), sum->end(), sums.begin() + c * chunk);
    }
  } else {
    for (int r = 0; r < ranks; ++r) {
      data.FillInput(r, x.data(), count);
      for (size_t c = first; c < last; ++c) {
        if (absl::Status s = SendAndAdd(codec, x.data() + c * chunk, sums.data() + c * chunk);
            !s.ok()) {
          return s;
        }
      }
    }
    for (size_t c = first; c < last; ++c) {
      Scale(sums.data() + c * chunk, chunk, 1.0f / static_cast<float>(ranks));
    }
  }
  if (!all_reduce)
    return std::vector<float>(sums.begin() + first * chunk, sums.begin() + last * chunk);
  std::vector<float> out(n * chunk, 0.0f);
  for (size_t c = 0; c < n; ++c) {
    if (absl::Status s = SendAndAdd(codec, sums.data() + c * chunk, out.data() + c * chunk);
        !s.ok()) {
      return s;
    }
  }
  out.resize(count);
  return out;
}

}  // namespace

bool Compressible(const Collective& collective) {
  const std::string_view name = collective.name();
  return name == "all_reduce" || name == "reduce_scatter";
}

absl::StatusOr<std::unique_ptr<CompressedOp>> CompressedOp::Create(
    const Collective& collective, Communicator* comm, const Layout& layout,
    const CompressionOptions& options) {
  std::unique_ptr<CompressedOp> op(new CompressedOp(layout));
  if (layout.send_count == 0) return op;
  if (IsAllReduce(collective)) {
    absl::StatusOr<std::unique_ptr<CompressedAllReduce>> made =
        CompressedAllReduce::Create(comm, layout.send_count, options);
    if (!made.ok()) return made.status();
    op->all_reduce_ = *std::move(made);
  } else {
    absl::StatusOr<std::unique_ptr<CompressedReduceScatter>> made =
        CompressedReduceScatter::Create(comm, layout.send_count, options);
    if (!made.ok()) return made.status();
    op->reduce_scatter_ = *std::move(made);
  }
  return op;
}

absl::Status CompressedOp::Run(const void* send, void* recv) {
  ++runs_;
  auto* out = static_cast<float*>(recv);
  if (reduce_scatter_) return reduce_scatter_->Run(static_cast<const float*>(send), out);
  if (!all_reduce_) return absl::OkStatus();
  if (send != recv) std::memcpy(out, send, layout_.send_count * sizeof(float));
  return all_reduce_->Run(out);
}

WireBytes CompressedOp::PerOperation() const {
  if (runs_ == 0) return {};
  if (all_reduce_) {
    return {.bytes = all_reduce_->wire_bytes() / runs_,
            .uncompressed_bytes = all_reduce_->uncompressed_bytes() / runs_};
  }
  if (reduce_scatter_) {
    return {.bytes = reduce_scatter_->wire_bytes() / runs_,
            .uncompressed_bytes = reduce_scatter_->uncompressed_bytes() / runs_};
  }
  return {};
}

absl::StatusOr<std::vector<float>> CompressedExpected(const Collective& collective,
                                                      const Layout& layout,
                                                      const CompressionOptions& options,
                                                      const TestData& data, int rank, int ranks,
                                                      bool ring) {
  if (layout.send_count == 0) return std::vector<float>();
  const bool all_reduce = IsAllReduce(collective);
  absl::StatusOr<std::vector<float>> expected =
      all_reduce && options.codec == Codec::kTopK
          ? TopKAllReduce(options, data, layout.send_count, ranks)
          : Chunked(all_reduce, ring, options, data, layout.send_count, rank, ranks);
  if (!expected.ok()) return expected.status();
  expected->resize(layout.recv_count);
  return *std::move(expected);
}

int64_t CountWrongFloats(const void* recv, const std::vector<float>& expected) {
  const auto* got = static_cast<const std::byte*>(recv);
  int64_t wrong = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::memcmp(got + i * sizeof(float), &expected[i], sizeof(float)) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace weft::perf
