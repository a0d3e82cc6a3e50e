// The gradient-codec rows (codec.h): "<Entry>/<level>/<size>" for the int8 and sign encoders
// (plain and with error feedback) and decode-and-add at every SIMD level, and
// "<Entry>/k1%/<size>" for top-k with feedback (k = n / 100) and its decode-and-add.
//
// <size> is the bytes of the fp32 gradient, which is also the payload (bytes_per_second), so a
// row compares directly with the Memcpy row of the same size. Memory bytes (mem_bytes_per_s)
// count the fp32 array read or written, the encoded bytes, and with feedback the error array
// read and written. Blocks are the default 256 elements.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "operands.h"
#include "page_buffer.h"
#include "weft/kernels/codec.h"

namespace weft::kernel_bench {
namespace {

enum class Entry {
  kEncodeInt8,
  kEncodeInt8WithFeedback,
  kDecodeAddInt8,
  kEncodeSign,
  kEncodeSignWithFeedback,
  kDecodeAddSign,
  kEncodeTopKWithFeedback,
  kDecodeAddTopK,
};

const char* EntryName(Entry entry) {
  switch (entry) {
    case Entry::kEncodeInt8:
      return "EncodeInt8";
    case Entry::kEncodeInt8WithFeedback:
      return "EncodeInt8WithFeedback";
    case Entry::kDecodeAddInt8:
      return "DecodeAddInt8";
    case Entry::kEncodeSign:
      return "EncodeSign";
    case Entry::kEncodeSignWithFeedback:
      return "EncodeSignWithFeedback";
    case Entry::kDecodeAddSign:
      return "DecodeAddSign";
    case Entry::kEncodeTopKWithFeedback:
      return "EncodeTopKWithFeedback";
    case Entry::kDecodeAddTopK:
      return "DecodeAddTopK";
  }
  return "invalid";
}

bool IsInt8(Entry e) {
  return e == Entry::kEncodeInt8 || e == Entry::kEncodeInt8WithFeedback ||
         e == Entry::kDecodeAddInt8;
}
bool IsTopK(Entry e) { return e == Entry::kEncodeTopKWithFeedback || e == Entry::kDecodeAddTopK; }
bool HasFeedback(Entry e) {
  return e == Entry::kEncodeInt8WithFeedback || e == Entry::kEncodeSignWithFeedback ||
         e == Entry::kEncodeTopKWithFeedback;
}

size_t EncodedBytes(Entry entry, size_t count) {
  if (IsTopK(entry)) return TopKEncodedBytes(count / 100);
  return IsInt8(entry) ? Int8EncodedBytes(count) : SignEncodedBytes(count);
}

// One call of the row's entry point; false when it reports an error.
bool Call(Entry entry, float* x, float* error, size_t count, std::byte* encoded) {
  auto* bytes = reinterpret_cast<uint8_t*>(encoded);
  auto* entries = reinterpret_cast<TopKEntry*>(encoded);
  switch (entry) {
    case Entry::kEncodeInt8:
      return EncodeInt8(x, count, bytes).ok();
    case Entry::kEncodeInt8WithFeedback:
      return EncodeInt8WithFeedback(x, error, count, bytes).ok();
    case Entry::kDecodeAddInt8:
      return DecodeAddInt8(bytes, count, x).ok();
    case Entry::kEncodeSign:
      return EncodeSign(x, count, bytes).ok();
    case Entry::kEncodeSignWithFeedback:
      return EncodeSignWithFeedback(x, error, count, bytes).ok();
    case Entry::kDecodeAddSign:
      return DecodeAddSign(bytes, count, x).ok();
    case Entry::kEncodeTopKWithFeedback:
      return EncodeTopKWithFeedback(x, error, count, count / 100, entries).ok();
    case Entry::kDecodeAddTopK:
      return DecodeAddTopK(entries, count / 100, count, x).ok();
  }
  return false;
}

void RunCodec(benchmark::State& state, Entry entry, SimdLevel level, size_t bytes) {
  SetSimdLevelForTesting(level);
  const size_t count = bytes / sizeof(float);
  const PageBuffer gradient(bytes), error(bytes), encoded(EncodedBytes(entry, count) + 64);
  if (gradient.data() == nullptr || error.data() == nullptr || encoded.data() == nullptr) {
    state.SkipWithError(("cannot allocate arrays of " + std::to_string(bytes) + " bytes").c_str());
    return;
  }
  auto* x = reinterpret_cast<float*>(gradient.data());
  auto* e = reinterpret_cast<float*>(error.data());
  FillVaried(DataType::kFloat32, x, count);
  // Decoders read a real encoding of the gradient (decoding adds bounded values, so the
  // accumulating output stays finite over the row's iterations).
  const bool decode = entry == Entry::kDecodeAddInt8 || entry == Entry::kDecodeAddSign ||
                      entry == Entry::kDecodeAddTopK;
  if (decode) {
    const Entry encoder = entry == Entry::kDecodeAddInt8   ? Entry::kEncodeInt8
                          : entry == Entry::kDecodeAddSign ? Entry::kEncodeSign
                                                           : Entry::kEncodeTopKWithFeedback;
    Call(encoder, x, e, count, encoded.data());
  }
  for (auto _ : state) {
    if (!Call(entry, x, e, count, encoded.data())) {
      state.SkipWithError((std::string(EntryName(entry)) + " failed").c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  const size_t memory = bytes + EncodedBytes(entry, count) + (HasFeedback(entry) ? 2 * bytes : 0);
  ReportRates(state, bytes, memory);
}

}  // namespace

void RegisterCodecBenchmarks() {
  constexpr Entry kEntries[] = {Entry::kEncodeInt8,
                                Entry::kEncodeInt8WithFeedback,
                                Entry::kDecodeAddInt8,
                                Entry::kEncodeSign,
                                Entry::kEncodeSignWithFeedback,
                                Entry::kDecodeAddSign,
                                Entry::kEncodeTopKWithFeedback,
                                Entry::kDecodeAddTopK};
  std::vector<PayloadSize> sizes(std::begin(kCachedSizes), std::end(kCachedSizes));
  sizes.push_back(kMemorySize);
  for (Entry entry : kEntries) {
    // Top-k has one code path whatever the level.
    const std::vector<SimdLevel> levels =
        IsTopK(entry) ? std::vector<SimdLevel>{ActiveSimdLevel()} : LevelsToSweep();
    for (const PayloadSize& size : sizes) {
      for (SimdLevel level : levels) {
        const std::string name = IsTopK(entry)
                                     ? RowName({EntryName(entry), "k1%", size.label})
                                     : RowName({EntryName(entry), Name(level), size.label});
        const size_t bytes = size.bytes;
        benchmark::RegisterBenchmark(name.c_str(), [entry, level, bytes](benchmark::State& state) {
          RunCodec(state, entry, level, bytes);
        });
      }
    }
  }
}

}  // namespace weft::kernel_bench
