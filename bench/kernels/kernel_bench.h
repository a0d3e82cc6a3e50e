// The shared vocabulary of kernels_bench: payload sizes, the SIMD levels each row is run at, how
// rows are named, how operands rotate, and the two rates every row reports.
//
// Rates. bytes_per_second counts the *payload*: the bytes of one input array per iteration
// (element count * element size), whatever the number of inputs, so a row compares directly with
// the memcpy row of the same size, whose payload is the bytes it copies. The counter
// mem_bytes_per_s counts every byte the kernel loads or stores per iteration (ReduceInto: 3x the
// payload, since dst and src are read and dst is written; memcpy: 2x). It is the memory-traffic
// model: a kernel bound by memory bandwidth shows about the mem_bytes_per_s of memcpy at the same
// size. It counts the bytes the program touches, not bus transfers: the read-for-ownership of a
// written cache line is not counted, nor its absence under non-temporal stores. Both rates are
// printed in binary units (GiB/s); JSON output holds plain bytes per second.
//
// Time. Single-threaded rows are timed in CPU time, which leaves out the time the thread spends
// preempted by other work on a shared machine; multi-threaded rows use wall time (they report the
// throughput of all threads together).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "weft/kernels/reduce.h"

namespace weft::kernel_bench {

struct PayloadSize {
  size_t bytes;
  const char* label;
};

// One size per level of a server core's memory hierarchy when a two-input kernel runs hot:
// 4 KiB stays in L1d (32-48 KiB), 256 KiB in L2 (1-2 MiB), 4 MiB in the shared L3.
inline constexpr PayloadSize kCachedSizes[] = {
    {size_t{4} << 10, "4KiB"}, {size_t{256} << 10, "256KiB"}, {size_t{4} << 20, "4MiB"}};
// Far beyond any L3, and large enough that separate outputs take the non-temporal store path
// (outputs of at least half the L3 do). Kept to a few rows: each one moves hundreds of MiB.
inline constexpr PayloadSize kMemorySize{size_t{64} << 20, "64MiB"};

// Rows marked "l3" rotate through this many bytes per operand array instead of reusing one
// slot, so that each call finds its operands in L3 (as a just-received chunk would be) rather
// than in L1 or L2. Used only with payloads well below it.
inline constexpr size_t kL3PoolBytes = size_t{8} << 20;

// From scalar up to ActiveSimdLevel(): the CPU's best unless WEFT_SIMD lowers it. Must be called
// before any benchmark runs, since every row sets the level it measures.
inline std::vector<SimdLevel> LevelsToSweep() {
  std::vector<SimdLevel> levels;
  const int best = static_cast<int>(ActiveSimdLevel());
  for (int level = 0; level <= best; ++level) levels.push_back(static_cast<SimdLevel>(level));
  return levels;
}

// "Entry/type/op/level/size": the parts joined with '/', the shape --benchmark_filter matches.
inline std::string RowName(std::initializer_list<std::string_view> parts) {
  std::string name;
  for (std::string_view part : parts) {
    if (!name.empty()) name += '/';
    name += part;
  }
  return name;
}

// The order in which a rotating row visits its `slots`: shuffled, so that the hardware prefetcher
// cannot run ahead into the next slot, with a fixed seed, so that every run sees the same order.
inline std::vector<int> RotationOrder(int slots) {
  std::vector<int> order(static_cast<size_t>(slots));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(12345));
  return order;
}

// Sets both rates (see the top of this file) from the bytes of one iteration. Both are totals
// of this thread's iterations: the library sums them over a row's threads, then divides by time.
inline void ReportRates(benchmark::State& state, size_t payload_bytes, size_t memory_bytes) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(payload_bytes));
  state.counters["mem_bytes_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(memory_bytes),
      benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1024);
}

// Each part of the suite registers its rows; main() calls them in this order.
void RegisterMemcpyBenchmarks();
void RegisterReduceBenchmarks();
void RegisterDivideBenchmarks();
void RegisterConvertBenchmarks();
void RegisterAdamWBenchmarks();
void RegisterCodecBenchmarks();

}  // namespace weft::kernel_bench
