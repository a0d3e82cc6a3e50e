// kernels_bench: Google Benchmark micro-benchmarks of weft_kernels (reductions, DivideBy, fp16/bf16
// conversions, AdamW, gradient codecs) with std::memcpy of the same sizes as the reference.
// kernel_bench.h says what the rates mean; each *_bench.cc file says which rows it registers.
//
// Every row runs for --benchmark_min_time=0.02 seconds unless the command line says otherwise,
// which keeps the whole binary (about 1,250 rows) near a minute. Examples:
//
//   # fp32 sum at every SIMD level against memcpy, at 4 KiB, 256 KiB and 64 MiB:
//   S='(4KiB|256KiB|64MiB)'
//   kernels_bench --benchmark_filter="^(ReduceInto/float/sum/[a-z0-9]+/$S|Memcpy/$S)"
//   # the same, steadier: add three half-second repetitions, and print only their statistics:
//   --benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   # 16-bit sums at the best level, and the conversions:
//   kernels_bench --benchmark_filter='^ReduceInto/(half|bfloat16)/sum/avx512/|To(Float|Half|BF)'
//   # everything ReduceMany8 does on int32, machine-readable:
//   kernels_bench --benchmark_filter='^ReduceMany8/int32/' --benchmark_format=json
//   # the list of rows:
//   kernels_bench --benchmark_list_tests
//
// Exits with status 1 when no row matches the filter.
#include <vector>

#include "kernel_bench.h"

int main(int argc, char** argv) {
  namespace kb = weft::kernel_bench;
  // Registration reads the active SIMD level, so it comes before any row runs.
  kb::RegisterMemcpyBenchmarks();
  kb::RegisterReduceBenchmarks();
  kb::RegisterDivideBenchmarks();
  kb::RegisterConvertBenchmarks();
  kb::RegisterAdamWBenchmarks();
  kb::RegisterCodecBenchmarks();

  // The default goes first: flags later on the command line override earlier ones.
  static char default_min_time[] = "--benchmark_min_time=0.02";
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + 1, default_min_time);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  const size_t rows = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return rows == 0 ? 1 : 0;
}
