// The reference rows: std::memcpy of the payload sizes the kernels use, on one and two threads.
//
// "Memcpy/<size>" copies <size> bytes per iteration on one thread; its "/l3" rows rotate through
// kL3PoolBytes like the reduction's. "Memcpy/<size>/real_time/threads:2" runs two threads that
// each copy their own <size> bytes per iteration; its rates are those of both threads together
// over wall time: the most two ranks copying at once can move. Payload (bytes_per_second) is the
// bytes copied, memory bytes (mem_bytes_per_s) twice that (read and written).
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "page_buffer.h"

namespace weft::kernel_bench {
namespace {

void RunMemcpy(benchmark::State& state, size_t bytes, int slots) {
  const size_t pool = bytes * static_cast<size_t>(slots);
  const PageBuffer src(pool);
  const PageBuffer dst(pool);
  const bool ok = src.data() != nullptr && dst.data() != nullptr;
  std::vector<size_t> offsets;
  if (ok) {
    std::memset(src.data(), 0x5a, pool);
    for (int position : RotationOrder(slots)) {
      offsets.push_back(static_cast<size_t>(position) * bytes);
    }
  } else {
    state.SkipWithError(
        ("cannot allocate two arrays of " + std::to_string(pool) + " bytes").c_str());
  }
  benchmark::DoNotOptimize(dst.data());
  size_t next = 0;
  // After SkipWithError the loop runs no iteration, but every thread must still enter it: its
  // start is a barrier across the row's threads.
  for (auto _ : state) {
    const size_t offset = offsets[next];
    next = next + 1 == offsets.size() ? 0 : next + 1;
    std::memcpy(dst.data() + offset, src.data() + offset, bytes);
    benchmark::ClobberMemory();
  }
  ReportRates(state, bytes, 2 * bytes);
}

}  // namespace

void RegisterMemcpyBenchmarks() {
  std::vector<PayloadSize> sizes(std::begin(kCachedSizes), std::end(kCachedSizes));
  sizes.push_back(kMemorySize);
  for (const PayloadSize& size : sizes) {
    const size_t bytes = size.bytes;
    const std::string name = RowName({"Memcpy", size.label});
    benchmark::RegisterBenchmark(name.c_str(),
                                 [bytes](benchmark::State& state) { RunMemcpy(state, bytes, 1); });
    if (bytes <= (size_t{256} << 10)) {
      const int slots = static_cast<int>(kL3PoolBytes / bytes);
      benchmark::RegisterBenchmark((name + "/l3").c_str(), [bytes, slots](benchmark::State& state) {
        RunMemcpy(state, bytes, slots);
      });
    }
    benchmark::RegisterBenchmark(name.c_str(),
                                 [bytes](benchmark::State& state) { RunMemcpy(state, bytes, 1); })
        ->Threads(2)
        ->UseRealTime();
  }
}

}  // namespace weft::kernel_bench
