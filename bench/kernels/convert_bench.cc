// The fp16/bf16 <-> fp32 bulk conversion rows: "<conversion>/<level>/<size>" for HalfToFloat,
// FloatToHalf, BFloat16ToFloat and FloatToBFloat16 at every SIMD level and cached size.
//
// <size> is the bytes of the 16-bit array (the data as it travels), which is also the payload
// (bytes_per_second); memory bytes (mem_bytes_per_s) add the fp32 array, 6 bytes per element
// in all; items_per_second counts elements.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "operands.h"
#include "page_buffer.h"
#include "weft/kernels/convert.h"

namespace weft::kernel_bench {
namespace {

enum class Conversion { kHalfToFloat, kFloatToHalf, kBFloat16ToFloat, kFloatToBFloat16 };

const char* ConversionName(Conversion conversion) {
  switch (conversion) {
    case Conversion::kHalfToFloat:
      return "HalfToFloat";
    case Conversion::kFloatToHalf:
      return "FloatToHalf";
    case Conversion::kBFloat16ToFloat:
      return "BFloat16ToFloat";
    case Conversion::kFloatToBFloat16:
      return "FloatToBFloat16";
  }
  return "invalid";
}

void RunConvert(benchmark::State& state, Conversion conversion, SimdLevel level, size_t count) {
  SetSimdLevelForTesting(level);
  const PageBuffer narrow(count * sizeof(uint16_t));
  const PageBuffer wide(count * sizeof(float));
  if (narrow.data() == nullptr || wide.data() == nullptr) {
    state.SkipWithError(
        ("cannot allocate arrays of " + std::to_string(count) + " elements").c_str());
    return;
  }
  auto* halves = reinterpret_cast<uint16_t*>(narrow.data());
  auto* floats = reinterpret_cast<float*>(wide.data());
  switch (conversion) {
    case Conversion::kHalfToFloat:
      FillVaried(DataType::kFloat16, halves, count);
      break;
    case Conversion::kBFloat16ToFloat:
      FillVaried(DataType::kBFloat16, halves, count);
      break;
    case Conversion::kFloatToHalf:
    case Conversion::kFloatToBFloat16:
      FillVaried(DataType::kFloat32, floats, count);
      break;
  }
  for (auto _ : state) {
    switch (conversion) {
      case Conversion::kHalfToFloat:
        HalfToFloat(halves, floats, count);
        break;
      case Conversion::kFloatToHalf:
        FloatToHalf(floats, halves, count);
        break;
      case Conversion::kBFloat16ToFloat:
        BFloat16ToFloat(halves, floats, count);
        break;
      case Conversion::kFloatToBFloat16:
        FloatToBFloat16(floats, halves, count);
        break;
    }
  }
  ReportRates(state, count * sizeof(uint16_t), count * (sizeof(uint16_t) + sizeof(float)));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(count));
}

}  // namespace

void RegisterConvertBenchmarks() {
  constexpr Conversion kConversions[] = {Conversion::kHalfToFloat, Conversion::kFloatToHalf,
                                         Conversion::kBFloat16ToFloat,
                                         Conversion::kFloatToBFloat16};
  const std::vector<SimdLevel> levels = LevelsToSweep();
  for (Conversion conversion : kConversions) {
    for (const PayloadSize& size : kCachedSizes) {
      for (SimdLevel level : levels) {
        const size_t count = size.bytes / sizeof(uint16_t);
        benchmark::RegisterBenchmark(
            RowName({ConversionName(conversion), Name(level), size.label}).c_str(),
            [conversion, level, count](benchmark::State& state) {
              RunConvert(state, conversion, level, count);
            });
      }
    }
  }
}

}  // namespace weft::kernel_bench
