#include "dispatch.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace weft::kernels_internal {
namespace {

SimdLevel DetectCpuSimdLevel() {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks (via XGETBV) that the OS saves the wider registers.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return SimdLevel::kAvx512;
  }
  return avx2 ? SimdLevel::kAvx2 : SimdLevel::kScalar;
}

// The best level this CPU (and its operating system) supports, ignoring WEFT_SIMD.
SimdLevel CpuSimdLevel() {
  static const SimdLevel level = DetectCpuSimdLevel();
  return level;
}

SimdLevel Clamp(SimdLevel requested) {
  const SimdLevel cpu = CpuSimdLevel();
  return static_cast<int>(requested) < static_cast<int>(cpu) ? requested : cpu;
}

// WEFT_SIMD may only lower the level; a value other than the three names is ignored.
SimdLevel InitialLevel() {
  const SimdLevel cpu = CpuSimdLevel();
  const char* env = std::getenv("WEFT_SIMD");
  if (env == nullptr) return cpu;
  if (std::strcmp(env, "scalar") == 0) return Clamp(SimdLevel::kScalar);
  if (std::strcmp(env, "avx2") == 0) return Clamp(SimdLevel::kAvx2);
  if (std::strcmp(env, "avx512") == 0) return Clamp(SimdLevel::kAvx512);
  return cpu;
}

const KernelTable& TableFor(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return kAvx512Kernels;
    case SimdLevel::kAvx2:
      return kAvx2Kernels;
    case SimdLevel::kScalar:
      break;
  }
  return kScalarKernels;
}

// The level and its table change together only in SetSimdLevelForTesting; kernels read the table
// pointer once per call, so a switch between calls is always seen whole.
struct DispatchState {
  std::atomic<SimdLevel> level;
  std::atomic<const KernelTable*> table;
};

DispatchState& State() {
  static DispatchState state = [] {
    const SimdLevel level = InitialLevel();
    return DispatchState{level, &TableFor(level)};
  }();
  return state;
}

}  // namespace

const KernelTable& ActiveKernels() { return *State().table.load(std::memory_order_acquire); }

}  // namespace weft::kernels_internal

namespace weft {

using kernels_internal::ActiveKernels;

SimdLevel ActiveSimdLevel() {
  return kernels_internal::State().level.load(std::memory_order_acquire);
}

const char* Name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "invalid";
}

void SetSimdLevelForTesting(SimdLevel level) {
  const SimdLevel clamped = kernels_internal::Clamp(level);
  auto& state = kernels_internal::State();
  state.level.store(clamped, std::memory_order_release);
  state.table.store(&kernels_internal::TableFor(clamped), std::memory_order_release);
}

namespace {

// The bytes of the outermost cache that CPU 0 sees, as Linux's sysfs describes it, or 0. glibc's
// sysconf(_SC_LEVEL3_CACHE_SIZE) reports an AMD package's L3 as a whole: 256 MiB on an EPYC VM
// whose cores share a 32 MiB slice, which would leave nothing to stream below 128 MiB.
size_t OutermostCacheBytesFromSysfs() {
  size_t level_seen = 0, bytes = 0;
  for (int index = 0;; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    size_t level = 0, size = 0;
    std::string unit;
    if (!(level_file >> level) || !(size_file >> size)) break;
    size_file >> unit;  // "32768K"
    if (unit == "K") size <<= 10;
    if (unit == "M") size <<= 20;
    if (level > level_seen) {
      level_seen = level;
      bytes = size;
    }
  }
  return bytes;
}

}  // namespace

size_t StreamingThresholdBytes() {
  static const size_t bytes = [] {
    size_t cache = OutermostCacheBytesFromSysfs();
    if (cache == 0) cache = static_cast<size_t>(std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE)));
    return cache > 0 ? cache / 2 : size_t{16} << 20;
  }();
  return bytes;
}

namespace {

// The combining operator's column in the kernel tables, or -1 for an invalid operator. kAvg sums:
// the collective divides once at the end.
int Column(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return 0;
    case ReduceOp::kProd:
      return 1;
    case ReduceOp::kMin:
      return 2;
    case ReduceOp::kMax:
      return 3;
  }
  return -1;
}

}  // namespace

void ReduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  Reduce(type, op, dst, dst, src, count);
}

void Reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  const int column = Column(op);
  if (count == 0 || !IsValid(type) || column < 0) return;
  const auto& kernels = ActiveKernels();
  const int t = static_cast<int>(type);
  const bool stream = dst != a && dst != b && count * SizeOf(type) >= StreamingThresholdBytes();
  (stream ? kernels.binary_streaming : kernels.binary)[t][column](dst, a, b, count);
}

void ReduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count) {
  const int column = Column(op);
  if (count == 0 || n < 1 || !IsValid(type) || column < 0) return;
  if (n == 1) {
    // A single source is copied as is: no widening, so even signaling NaNs survive.
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * SizeOf(type));
    return;
  }
  if (n == 2) {
    Reduce(type, op, dst, srcs[0], srcs[1], count);
    return;
  }
  const auto& kernels = ActiveKernels();
  const int t = static_cast<int>(type);
  bool stream = count * SizeOf(type) >= StreamingThresholdBytes();
  for (int k = 0; k < n && stream; ++k) stream = srcs[k] != dst;
  (stream ? kernels.many_streaming : kernels.many)[t][column](dst, srcs, n, count);
}

void DivideBy(DataType type, void* data, size_t count, int divisor) {
  // Dividing by one is the identity (an average over one rank), and an integer division by zero
  // has no meaningful result: both leave the data as it is.
  if (count == 0 || !IsValid(type) || divisor == 1) return;
  if (divisor == 0 && !IsFloatingPoint(type)) return;
  ActiveKernels().divide[static_cast<int>(type)](data, count, divisor);
}

}  // namespace weft
