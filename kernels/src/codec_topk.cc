// Top-k selection with error feedback: a radix histogram over the magnitude bits finds the bucket
// holding the k-th largest magnitude, a selection among that bucket's elements finds the exact
// threshold, and one pass in index order emits the entries (so they come out sorted by index and
// ties at the threshold go to the lower indices).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weft/kernels/codec.h"

namespace weft {
namespace {

// The element's value as the codec sees it: x (+ error), with non-finite values as +0.
template <bool kFeedback>
float Value(const float* x, const float* error, size_t i) {
  const float v = kFeedback ? x[i] + error[i] : x[i];
  return (std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu) < 0x7F800000u ? v : 0.0f;
}

// |v| as an integer: for non-negative floats the bit patterns order like the values.
uint32_t Key(float v) { return std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu; }

// Keys of finite values are below 0x7F800000, so their top 11 bits index 2048 buckets.
constexpr int kBucketShift = 20;
constexpr size_t kBuckets = size_t{1} << (31 - kBucketShift);

// Entries with a key above `key` are sent, and the first `ties` entries whose key equals it.
struct Threshold {
  uint32_t key;
  size_t ties;
};

template <bool kFeedback>
Threshold SelectThreshold(const float* x, const float* error, size_t n, size_t k) {
  // No key exceeds UINT32_MAX, and none equals it: nothing is sent.
  if (k == 0) return Threshold{UINT32_MAX, 0};
  std::array<size_t, kBuckets> histogram{};
  for (size_t i = 0; i < n; ++i) ++histogram[Key(Value<kFeedback>(x, error, i)) >> kBucketShift];
  // The bucket holding the k-th largest key, and how many of its keys are among the k.
  size_t above = 0;
  size_t bucket = kBuckets - 1;
  while (above + histogram[bucket] < k) above += histogram[bucket--];
  const size_t wanted = k - above;
  std::vector<uint32_t> candidates;
  candidates.reserve(histogram[bucket]);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = Key(Value<kFeedback>(x, error, i));
    if (key >> kBucketShift == bucket) candidates.push_back(key);
  }
  const auto nth = candidates.begin() + static_cast<std::ptrdiff_t>(wanted - 1);
  std::nth_element(candidates.begin(), nth, candidates.end(), std::greater<>());
  const uint32_t threshold = *nth;
  const size_t greater = static_cast<size_t>(std::count_if(
      candidates.begin(), candidates.end(), [&](uint32_t c) { return c > threshold; }));
  return Threshold{threshold, wanted - greater};
}

// Emits the selected entries in index order, updates the error, and counts non-finite values.
template <bool kFeedback>
size_t Emit(const float* x, float* error, size_t n, Threshold threshold, TopKEntry* out) {
  size_t nonfinite = 0;
  size_t ties = threshold.ties;
  TopKEntry* next = out;
  for (size_t i = 0; i < n; ++i) {
    const float raw = kFeedback ? x[i] + error[i] : x[i];
    const float v = Value<kFeedback>(x, error, i);
    nonfinite += (Key(raw) >= 0x7F800000u) ? 1 : 0;
    const uint32_t key = Key(v);
    bool send = key > threshold.key;
    if (key == threshold.key && ties > 0) {
      send = true;
      --ties;
    }
    if (send) *next++ = TopKEntry{static_cast<uint32_t>(i), v};
    if constexpr (kFeedback) error[i] = send ? 0.0f : v;
  }
  return nonfinite;
}

template <bool kFeedback>
absl::StatusOr<size_t> EncodeTopKImpl(const char* function, const float* x, float* error, size_t n,
                                      size_t k, TopKEntry* out) {
  if (k > n) {
    return absl::InvalidArgumentError(std::string(function) + ": k (" + std::to_string(k) +
                                      ") exceeds n (" + std::to_string(n) + ")");
  }
  if (n > kTopKMaxElements) {
    return absl::InvalidArgumentError(std::string(function) + ": n (" + std::to_string(n) +
                                      ") exceeds 2^32, the uint32 index range");
  }
  if ((n > 0 && x == nullptr) || (k > 0 && out == nullptr) ||
      (kFeedback && n > 0 && error == nullptr)) {
    return absl::InvalidArgumentError(std::string(function) + ": null buffer");
  }
  const Threshold threshold = SelectThreshold<kFeedback>(x, error, n, k);
  return Emit<kFeedback>(x, error, n, threshold, out);
}

// Every entry's index must lie below n before anything is written.
absl::Status CheckEntries(const char* function, const TopKEntry* in, size_t k, size_t n,
                          const float* out) {
  if ((k > 0 && in == nullptr) || (n > 0 && out == nullptr)) {
    return absl::InvalidArgumentError(std::string(function) + ": null buffer");
  }
  for (size_t j = 0; j < k; ++j) {
    if (in[j].index >= n) {
      return absl::InvalidArgumentError(std::string(function) + ": entry " + std::to_string(j) +
                                        " has index " + std::to_string(in[j].index) +
                                        ", not below n (" + std::to_string(n) + ")");
    }
  }
  return absl::OkStatus();
}

}  // namespace

size_t TopKEncodedBytes(size_t k) { return k * sizeof(TopKEntry); }

absl::StatusOr<size_t> EncodeTopK(const float* x, size_t n, size_t k, TopKEntry* out) {
  return EncodeTopKImpl<false>("EncodeTopK", x, nullptr, n, k, out);
}

absl::StatusOr<size_t> EncodeTopKWithFeedback(const float* x, float* error, size_t n, size_t k,
                                              TopKEntry* out) {
  return EncodeTopKImpl<true>("EncodeTopKWithFeedback", x, error, n, k, out);
}

absl::Status DecodeTopK(const TopKEntry* in, size_t k, size_t n, float* out) {
  if (absl::Status status = CheckEntries("DecodeTopK", in, k, n, out); !status.ok()) return status;
  std::fill(out, out + n, 0.0f);
  for (size_t j = 0; j < k; ++j) out[in[j].index] = in[j].value;
  return absl::OkStatus();
}

absl::Status DecodeAddTopK(const TopKEntry* in, size_t k, size_t n, float* out) {
  if (absl::Status status = CheckEntries("DecodeAddTopK", in, k, n, out); !status.ok()) {
    return status;
  }
  for (size_t j = 0; j < k; ++j) out[in[j].index] += in[j].value;
  return absl::OkStatus();
}

}  // namespace weft
