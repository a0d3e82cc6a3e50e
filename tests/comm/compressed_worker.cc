// One rank of the compressed all-reduce tests (started by weftrun from compressed_test). Exits 0
// when every check passed; otherwise prints what differed and exits 1.
//
// For every codec, three calls in a row (so error feedback carries over): the result on this rank
// equals, bit for bit, the documented computation redone here for all ranks from their inputs
// (each rank's chunks encoded with its error, decoded and added in rank order, times 1/N, encoded
// with the chunk owner's error, decoded; top-k: every rank's entries added in rank order, times
// 1/N); the wire bytes are the codec's; a rank that passes an infinity gets FailedPrecondition
// while the others finish.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_all_reduce.h"
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
  Reference(int ranks, size_t count, const CompressionOptions& o)
      : n_(ranks),
        count_(count),
        o_(o),
        chunk_((count + ranks - 1) / ranks),
        k_(std::min(count, static_cast<size_t>(std::ceil(o.topk_ratio * count)))) {
    worker_.assign(n_, std::vector<float>(o.codec == Codec::kTopK ? count : n_ * chunk_, 0.0f));
    server_.assign(n_, std::vector<float>(chunk_, 0.0f));
  }

  std::vector<float> Call(int t) {
    if (o_.codec == Codec::kTopK) return TopK(t);
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
  size_t chunk_, k_;
  std::vector<std::vector<float>> worker_, server_;
};

void TestCodec(Communicator* comm, Codec codec, size_t count) {
  CompressionOptions options;
  options.codec = codec;
  options.block = 64;
  options.topk_ratio = 0.05;
  options.timeout = Scaled(absl::Seconds(30));
  const std::string what = absl::StrCat(Name(codec), " count ", count);
  auto reduce = CompressedAllReduce::Create(comm, count, options);
  Check(reduce.ok(), what + ": Create: " + reduce.status().ToString());
  if (!reduce.ok()) return;
  Reference reference(comm->size(), count, options);
  for (int t = 0; t < 3; ++t) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Input(rank, t, i);
    absl::Status s = (*reduce)->Run(data.data());
    Check(s.ok(), absl::StrCat(what, " call ", t, ": ", s.ToString()));
    const std::vector<float> expected = reference.Call(t);
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

void TestInfinity(Communicator* comm) {
  CompressionOptions options;
  options.timeout = Scaled(absl::Seconds(30));
  auto reduce = CompressedAllReduce::Create(comm, 1000, options);
  if (!reduce.ok()) return;
  std::vector<float> data(1000, 1.0f);
  if (rank == 0) data[5] = std::numeric_limits<float>::infinity();
  const absl::Status s = (*reduce)->Run(data.data());
  Check(rank == 0 ? absl::IsFailedPrecondition(s) : s.ok(),
        absl::StrCat("an infinity on rank 0: ", s.ToString()));
  Check(std::isfinite(data[5]), "the infinity must arrive as a finite value");
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
    for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}})
      TestCodec(comm->get(), codec, count);
  }
  TestInfinity(comm->get());
  if (failures == 0 && rank == 0) std::printf("compressed_worker: all checks passed\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace weft::testing

int main() { return weft::testing::Main(); }
