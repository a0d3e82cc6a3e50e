// One rank of the compressed all-reduce and reduce-scatter tests (started by weftrun from
// compressed_test). Exits 0 when every check passed; otherwise prints what differed and exits 1.
//
// For every codec, three calls in a row (so error feedback carries over): the result on this rank
// equals, bit for bit, the documented computation redone here for all ranks from their inputs
// (each rank's chunks encoded with its error, decoded and added in rank order, times 1/N, or
// forced onto the ring its chain of decode, add and re-encode; encoded with the chunk owner's
// error, decoded; top-k: every rank's entries added in rank order, times
// 1/N), and the reduce-scatter's chunk equals the first half of that computation (top-k: per
// chunk) or, forced onto the ring, the ring's chain of decode, add and re-encode, in place too; the
// wire bytes are the codec's; a rank that passes an infinity gets FailedPrecondition while the
// others finish.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_all_reduce.h"
#include "weft/comm/compressed_reduce_scatter.h"
#include "weft/kernels/codec.h"
#include "weft/kernels/precision.h"

namespace weft::testing {
namespace {

int failures = 0;
int rank = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
}

// Rank r's input at call t: varied signs and magnitudes, a few large outliers.
float Input(int r, int t, size_t i) {
  const float base = std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(r) +
                              0.7f * static_cast<float>(t));
  return i % 97 == 0 ? 40.0f * base : base * (1.0f + 0.01f * static_cast<float>(i % 13));
}

// The documented computation for every rank: what each rank's encoder and the chunk owners'
// encoders produce, with their errors kept across calls.
class Reference {
 public:
  // `scatter`: the reduce-scatter's computation, whose top-k is per chunk.
  Reference(int ranks, size_t count, const CompressionOptions& o, bool scatter = false)
      : n_(ranks),
        count_(count),
        o_(o),
        chunk_((count + ranks - 1) / ranks),
        k_(std::min(count, static_cast<size_t>(std::ceil(o.topk_ratio * count)))),
        chunk_k_(std::min(chunk_, static_cast<size_t>(std::ceil(o.topk_ratio * chunk_)))) {
    const bool whole = o.codec == Codec::kTopK && !scatter;
    worker_.assign(n_, std::vector<float>(whole ? count : n_ * chunk_, 0.0f));
    server_.assign(n_, std::vector<float>(chunk_, 0.0f));
  }

  // The reduce-scatter: rank `mine`'s chunk, every rank's worker error kept across calls.
  std::vector<float> Scatter(int t, int mine) {
    std::vector<float> out(chunk_, 0.0f);
    for (int r = 0; r < n_; ++r) {
      std::vector<float> x(n_ * chunk_, 0.0f);
      for (size_t i = 0; i < count_; ++i) x[i] = Input(r, t, i);
      for (int c = 0; c < n_; ++c) {
        std::vector<uint8_t> sent = Encode(x.data() + c * chunk_, worker_[r].data() + c * chunk_);
        if (c == mine) DecodeAdd(sent, out.data());
      }
    }
    Scale(out.data(), chunk_, 1.0f / static_cast<float>(n_));
    return out;
  }

  // The ring's reduce-scatter: chunk `mine` starts at rank mine+1, and every rank after it
  // decodes the partial sum, adds its own chunk and re-encodes it with its error for that chunk.
  std::vector<float> RingScatter(int t, int mine) {
    auto own = [&](int r) {
      std::vector<float> x(chunk_, 0.0f);
      for (size_t i = 0; i < chunk_ && mine * chunk_ + i < count_; ++i) {
        x[i] = Input(r, t, mine * chunk_ + i);
      }
      return x;
    };
    const int first = (mine + 1) % n_;
    std::vector<uint8_t> sent = Encode(own(first).data(), worker_[first].data() + mine * chunk_);
    for (int j = 2; j <= n_; ++j) {
      const int r = (mine + j) % n_;
      std::vector<float> partial(chunk_, 0.0f);
      DecodeAdd(sent, partial.data());
      const std::vector<float> x = own(r);
      for (size_t i = 0; i < chunk_; ++i) partial[i] += x[i];
      if (r == mine) {
        Scale(partial.data(), chunk_, 1.0f / static_cast<float>(n_));
        return partial;
      }
      sent = Encode(partial.data(), worker_[r].data() + mine * chunk_);
    }
    return {};
  }

  std::vector<float> Call(int t, bool ring = false) {
    if (o_.codec == Codec::kTopK) return TopK(t);
    if (ring) {
      std::vector<float> out(n_ * chunk_, 0.0f);
      for (int c = 0; c < n_; ++c) {
        std::vector<float> sum = RingScatter(t, c);
        DecodeAdd(Encode(sum.data(), server_[c].data()), out.data() + c * chunk_);
      }
      out.resize(count_);
      return out;
    }
    std::vector<std::vector<std::vector<uint8_t>>> sent(n_);  // [rank][chunk]
    for (int r = 0; r < n_; ++r) {
      std::vector<float> x(n_ * chunk_, 0.0f);
      for (size_t i = 0; i < count_; ++i) x[i] = Input(r, t, i);
      for (int c = 0; c < n_; ++c) {
        sent[r].push_back(Encode(x.data() + c * chunk_, worker_[r].data() + c * chunk_));
      }
    }
    std::vector<float> out(n_ * chunk_, 0.0f);
    for (int c = 0; c < n_; ++c) {
      std::vector<float> sum(chunk_, 0.0f);
      for (int r = 0; r < n_; ++r) DecodeAdd(sent[r][c], sum.data());
      Scale(sum.data(), chunk_, 1.0f / static_cast<float>(n_));
      DecodeAdd(Encode(sum.data(), server_[c].data()), out.data() + c * chunk_);
    }
    out.resize(count_);
    return out;
  }

 private:
  bool half() const { return o_.codec == Codec::kFloat16 || o_.codec == Codec::kBFloat16; }
  Precision precision() const {
    return o_.codec == Codec::kBFloat16 ? Precision::kBFloat16 : Precision::kFloat16;
  }
  std::vector<uint8_t> Encode(const float* x, float* error) {
    std::vector<uint8_t> out;
    if (half()) {
      std::vector<uint16_t> h(chunk_);
      Narrow(precision(), x, h.data(), chunk_);
      out.resize(2 * chunk_);
      std::memcpy(out.data(), h.data(), out.size());
    } else if (o_.codec == Codec::kTopK) {
      out.resize(TopKEncodedBytes(chunk_k_));
      EncodeTopKWithFeedback(x, error, chunk_, chunk_k_, reinterpret_cast<TopKEntry*>(out.data()))
          .IgnoreError();
    } else if (o_.codec == Codec::kInt8) {
      out.resize(Int8EncodedBytes(chunk_, o_.block));
      EncodeInt8WithFeedback(x, error, chunk_, out.data(), o_.block).IgnoreError();
    } else {
      out.resize(SignEncodedBytes(chunk_, o_.block));
      EncodeSignWithFeedback(x, error, chunk_, out.data(), o_.block).IgnoreError();
    }
    return out;
  }
  void DecodeAdd(const std::vector<uint8_t>& in, float* out) {
    if (half()) {
      std::vector<uint16_t> h(chunk_);
      std::vector<float> w(chunk_);
      std::memcpy(h.data(), in.data(), in.size());
      Widen(precision(), h.data(), w.data(), chunk_);
      for (size_t i = 0; i < chunk_; ++i) out[i] += w[i];
    } else if (o_.codec == Codec::kTopK) {
      DecodeAddTopK(reinterpret_cast<const TopKEntry*>(in.data()), chunk_k_, chunk_, out)
          .IgnoreError();
    } else if (o_.codec == Codec::kInt8) {
      DecodeAddInt8(in.data(), chunk_, out, o_.block).IgnoreError();
    } else {
      DecodeAddSign(in.data(), chunk_, out, o_.block).IgnoreError();
    }
  }
  std::vector<float> TopK(int t) {
    std::vector<float> out(count_, 0.0f);
    for (int r = 0; r < n_; ++r) {
      std::vector<float> x(count_);
      for (size_t i = 0; i < count_; ++i) x[i] = Input(r, t, i);
      std::vector<TopKEntry> entries(k_);
      EncodeTopKWithFeedback(x.data(), worker_[r].data(), count_, k_, entries.data()).IgnoreError();
      DecodeAddTopK(entries.data(), k_, count_, out.data()).IgnoreError();
    }
    Scale(out.data(), count_, 1.0f / static_cast<float>(n_));
    return out;
  }

  int n_;
  size_t count_;
  CompressionOptions o_;
  size_t chunk_, k_, chunk_k_;
  std::vector<std::vector<float>> worker_, server_;
};

void TestCodec(Communicator* comm, Codec codec, size_t count, ScatterPath path) {
  CompressionOptions options;
  options.codec = codec;
  options.scatter = path;
  options.block = 64;
  options.topk_ratio = 0.05;
  options.timeout = Scaled(absl::Seconds(30));
  auto reduce = CompressedAllReduce::Create(comm, count, options);
  Check(reduce.ok(), absl::StrCat(Name(codec), ": Create: ", reduce.status().ToString()));
  if (!reduce.ok()) return;
  // Forced, the ring runs (top-k has no reduce-scatter half); auto is the cost model's choice,
  // the direct path on one node.
  const bool ring = (*reduce)->ring();
  const std::string what = absl::StrCat(Name(codec), ring ? " on the ring" : "", " count ", count);
  if (path == ScatterPath::kRing) {
    Check(ring == (comm->size() > 1 && codec != Codec::kTopK), what + ": the ring not taken");
  } else if (comm->NodeRanks().size() == static_cast<size_t>(comm->size())) {
    Check(!ring, what + ": the ring taken on one node");
  }
  Reference reference(comm->size(), count, options);
  for (int t = 0; t < 3; ++t) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Input(rank, t, i);
    absl::Status s = (*reduce)->Run(data.data());
    Check(s.ok(), absl::StrCat(what, " call ", t, ": ", s.ToString()));
    const std::vector<float> expected = reference.Call(t, ring);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += std::memcmp(&data[i], &expected[i], 4) != 0;
    Check(wrong == 0, absl::StrCat(what, " call ", t, ": ", wrong, " of ", count,
                                   " elements differ from the documented result"));
  }
  // Bytes: 2(N-1) encoded chunks per call (top-k: (N-1) entry lists).
  const size_t n = static_cast<size_t>(comm->size()), chunk = (count + n - 1) / n;
  const size_t k = static_cast<size_t>(std::ceil(options.topk_ratio * count));
  const size_t per_call = codec == Codec::kTopK   ? (n - 1) * TopKEncodedBytes(k)
                          : codec == Codec::kInt8 ? 2 * (n - 1) * Int8EncodedBytes(chunk, 64)
                          : codec == Codec::kSign ? 2 * (n - 1) * SignEncodedBytes(chunk, 64)
                                                  : 2 * (n - 1) * 2 * chunk;
  Check((*reduce)->wire_bytes() == 3 * per_call,
        absl::StrCat(what, ": wire bytes ", (*reduce)->wire_bytes(), ", expected ", 3 * per_call));
}

// The reduce-scatter, three calls in a row: this rank's chunk equals the documented computation's
// bit for bit, in place too (the slice inside the array), with the codec's wire bytes.
void TestScatter(Communicator* comm, Codec codec, size_t count, ScatterPath path) {
  CompressionOptions options;
  options.codec = codec;
  options.scatter = path;
  options.block = 64;
  options.topk_ratio = 0.05;
  options.timeout = Scaled(absl::Seconds(30));
  const bool ring = path == ScatterPath::kRing && comm->size() > 1;
  const std::string what =
      absl::StrCat(ring ? "ring" : "direct", " reduce-scatter ", Name(codec), " count ", count);
  auto scatter = CompressedReduceScatter::Create(comm, count, options);
  Check(scatter.ok(), what + ": Create: " + scatter.status().ToString());
  if (!scatter.ok()) return;
  Check((*scatter)->ring() == ring, what + ": the path forced is not the one taken");
  Reference reference(comm->size(), count, options, /*scatter=*/true);
  const size_t chunk = (*scatter)->chunk();
  for (int t = 0; t < 3; ++t) {
    std::vector<float> data(comm->size() * chunk, 0.0f);
    for (size_t i = 0; i < count; ++i) data[i] = Input(rank, t, i);
    // Odd calls in place, as ZeRO-1 runs it.
    std::vector<float> apart(chunk);
    float* slice = t % 2 == 1 ? data.data() + rank * chunk : apart.data();
    absl::Status s = (*scatter)->Run(data.data(), slice);
    Check(s.ok(), absl::StrCat(what, " call ", t, ": ", s.ToString()));
    const std::vector<float> expected =
        ring ? reference.RingScatter(t, rank) : reference.Scatter(t, rank);
    size_t wrong = 0;
    for (size_t i = 0; i < chunk; ++i) wrong += std::memcmp(&slice[i], &expected[i], 4) != 0;
    Check(wrong == 0, absl::StrCat(what, " call ", t, ": ", wrong, " of ", chunk,
                                   " elements differ from the documented result"));
  }
  const size_t n = static_cast<size_t>(comm->size());
  const size_t k = static_cast<size_t>(std::ceil(options.topk_ratio * chunk));
  const size_t per_call = codec == Codec::kTopK   ? (n - 1) * TopKEncodedBytes(k)
                          : codec == Codec::kInt8 ? (n - 1) * Int8EncodedBytes(chunk, 64)
                          : codec == Codec::kSign ? (n - 1) * SignEncodedBytes(chunk, 64)
                                                  : (n - 1) * 2 * chunk;
  Check((*scatter)->wire_bytes() == 3 * per_call,
        absl::StrCat(what, ": wire bytes ", (*scatter)->wire_bytes(), ", expected ", 3 * per_call));
}

// On both paths: on the ring, element 5 lies in rank 0's own chunk, which is added, not encoded.
void TestInfinity(Communicator* comm, ScatterPath path) {
  CompressionOptions options;
  options.timeout = Scaled(absl::Seconds(30));
  options.scatter = path;
  auto reduce = CompressedAllReduce::Create(comm, 1000, options);
  if (!reduce.ok()) return;
  std::vector<float> data(1000, 1.0f);
  if (rank == 0) data[5] = std::numeric_limits<float>::infinity();
  const absl::Status s = (*reduce)->Run(data.data());
  const std::string what = (*reduce)->ring() ? "on the ring, " : "";
  Check(rank == 0 ? absl::IsFailedPrecondition(s) : s.ok(),
        absl::StrCat(what, "an infinity on rank 0: ", s.ToString()));
  Check(std::isfinite(data[5]), what + "the infinity must arrive as a finite value");
  Check(!CompressedAllReduce::Create(comm, 0, options).ok(), "count 0 must be refused");
}

int Main() {
  alarm(static_cast<unsigned>(60 * TimeScale()));
  auto comm = Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "communicator: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  rank = (*comm)->rank();
  for (Codec codec :
       {Codec::kFloat16, Codec::kBFloat16, Codec::kInt8, Codec::kSign, Codec::kTopK}) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}}) {
      TestCodec(comm->get(), codec, count, ScatterPath::kAuto);
      TestCodec(comm->get(), codec, count, ScatterPath::kRing);
      TestScatter(comm->get(), codec, count, ScatterPath::kDirect);
      TestScatter(comm->get(), codec, count, ScatterPath::kRing);
    }
  }
  TestInfinity(comm->get(), ScatterPath::kDirect);
  TestInfinity(comm->get(), ScatterPath::kRing);
  // The cost model's choice, where the test says what it must be (pretend nodes).
  if (const char* expect = std::getenv("WEFT_EXPECT_COMPRESSED_RING"); expect != nullptr) {
    CompressionOptions options;
    auto scatter = CompressedReduceScatter::Create(comm->get(), size_t{1} << 20, options);
    Check(scatter.ok() && (*scatter)->ring() == (std::string(expect) == "1"),
          absl::StrCat("1 Mi elements of int8 on this layout: the cost model must choose the ",
                       std::string(expect) == "1" ? "ring" : "direct path"));
  }
  if (failures == 0 && rank == 0) std::printf("compressed_worker: all checks passed\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace weft::testing

int main() { return weft::testing::Main(); }
