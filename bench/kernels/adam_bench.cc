// The fused AdamW rows: "AdamW/fp32/<level>/<size>" (AdamW) and "AdamW/bf16copy/<level>/<size>"
// (AdamWWithBFloat16Copy) at every SIMD level, for each cached size and the memory size.
//
// <size> is the bytes of the fp32 parameter array, which is also the payload (bytes_per_second),
// as a Memcpy row's size is the bytes it copies; the optimizer state is four such arrays
// (parameters, gradients, both moments), so the 64 MiB rows update 256 MiB of state. Memory bytes
// (mem_bytes_per_s) are 28 per element (parameters and both moments read and written, gradients
// read), 30 with the bf16 copy: it compares with Memcpy's mem_bytes_per_s, and a kernel running
// at memory speed shows about the same rate.
//
// Every iteration is one optimizer step over the same arrays with the constants of a mid-run
// step. Gradients and initial parameters are FillVaried's normal numbers; each step moves a
// parameter by about lr, and the moments converge to g and g^2, so no value drifts into
// subnormals or infinities however many iterations a row runs.
//
// These rows register themselves when the program starts, ahead of main()'s.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "operands.h"
#include "page_buffer.h"
#include "weft/kernels/adam.h"

namespace weft::kernel_bench {
namespace {

void RunAdamW(benchmark::State& state, SimdLevel level, size_t count, bool with_copy) {
  SetSimdLevelForTesting(level);
  const size_t bytes = count * sizeof(float);
  const PageBuffer param(bytes), grad(bytes), m(bytes), v(bytes);
  const PageBuffer copy(with_copy ? count * sizeof(uint16_t) : 0);
  if (param.data() == nullptr || grad.data() == nullptr || m.data() == nullptr ||
      v.data() == nullptr || (with_copy && copy.data() == nullptr)) {
    state.SkipWithError(
        ("cannot allocate the arrays of " + std::to_string(count) + " elements").c_str());
    return;
  }
  auto* p = reinterpret_cast<float*>(param.data());
  auto* g = reinterpret_cast<float*>(grad.data());
  FillVaried(DataType::kFloat32, p, count);
  FillVaried(DataType::kFloat32, g, count);
  auto* ms = reinterpret_cast<float*>(m.data());
  auto* vs = reinterpret_cast<float*>(v.data());
  auto* bf16 = reinterpret_cast<uint16_t*>(copy.data());
  const AdamWStep step = MakeAdamWStep(0.9, 0.95, 1e-8, 1e-4, 0.1, 1000);
  for (auto _ : state) {
    if (with_copy) {
      AdamWWithBFloat16Copy(step, p, g, ms, vs, bf16, count);
    } else {
      AdamW(step, p, g, ms, vs, count);
    }
    benchmark::ClobberMemory();
  }
  const size_t per_element = 7 * sizeof(float) + (with_copy ? sizeof(uint16_t) : 0);
  ReportRates(state, bytes, count * per_element);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(count));
}

}  // namespace

void RegisterAdamWBenchmarks() {
  std::vector<PayloadSize> sizes(std::begin(kCachedSizes), std::end(kCachedSizes));
  sizes.push_back(kMemorySize);
  const std::vector<SimdLevel> levels = LevelsToSweep();
  for (bool with_copy : {false, true}) {
    for (const PayloadSize& size : sizes) {
      for (SimdLevel level : levels) {
        const size_t count = size.bytes / sizeof(float);
        benchmark::RegisterBenchmark(
            RowName({"AdamW", with_copy ? "bf16copy" : "fp32", Name(level), size.label}).c_str(),
            [level, count, with_copy](benchmark::State& state) {
              RunAdamW(state, level, count, with_copy);
            });
      }
    }
  }
}

}  // namespace weft::kernel_bench
