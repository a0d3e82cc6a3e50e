// The DivideBy rows (the last step of an average): "DivideBy/<type>/<level>/<size>" for every
// type, SIMD level and cached size.
//
// The divisor is -1. It is exact in every type, so thousands of calls on the same data neither
// decay it into subnormals or zeros nor grow it, and the kernels divide by it as by any other
// divisor (only 1, and 0 for integers, return early). Payload (bytes_per_second) is
// count * element size; memory bytes (mem_bytes_per_s) twice that (read and written in place).
#include <cstddef>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "operands.h"
#include "page_buffer.h"
#include "weft/kernels/dtype.h"
#include "weft/kernels/reduce.h"

namespace weft::kernel_bench {
namespace {

constexpr int kDivisor = -1;

void RunDivide(benchmark::State& state, DataType type, SimdLevel level, size_t bytes) {
  SetSimdLevelForTesting(level);
  const PageBuffer data(bytes);
  if (data.data() == nullptr) {
    state.SkipWithError(("cannot allocate " + std::to_string(bytes) + " bytes").c_str());
    return;
  }
  const size_t count = bytes / SizeOf(type);
  FillVaried(type, data.data(), count);
  for (auto _ : state) DivideBy(type, data.data(), count, kDivisor);
  ReportRates(state, bytes, 2 * bytes);
}

}  // namespace

void RegisterDivideBenchmarks() {
  const std::vector<SimdLevel> levels = LevelsToSweep();
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<DataType>(t);
    for (const PayloadSize& size : kCachedSizes) {
      for (SimdLevel level : levels) {
        const size_t bytes = size.bytes;
        benchmark::RegisterBenchmark(
            RowName({"DivideBy", Name(type), Name(level), size.label}).c_str(),
            [type, level, bytes](benchmark::State& state) {
              RunDivide(state, type, level, bytes);
            });
      }
    }
  }
}

}  // namespace weft::kernel_bench
