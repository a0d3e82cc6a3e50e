// The reduction rows: ReduceInto, Reduce with a separate output, and ReduceMany with 2, 4 and 8
// sources, named "<entry>/<type>/<op>/<level>/<size>" (e.g. "ReduceMany4/bfloat16/max/avx2/4MiB").
//
// Coverage, pruned so that the whole binary runs in about a minute:
// - ReduceInto: every type x {sum, prod, min, max} x SIMD level x {4 KiB, 256 KiB, 4 MiB}.
// - Reduce, ReduceMany2, ReduceMany4, ReduceMany8: every type x op at the best level, and every
//   type at the lower levels for sum only (the other operators run the same loops there).
// - 64 MiB, for fp32 sum, bf16 sum and int32 max only: ReduceInto and Reduce at every level (a
//   separate output this large takes each level's non-temporal store path), ReduceMany at the
//   best level.
// - ReduceInto fp32 sum at every level, 4 KiB and 256 KiB, also as "/l3" rows: these rotate
//   through kL3PoolBytes of operands, so each call finds them in L3 instead of L1 or L2. Every
//   other row reuses one set of operands (hot in the cache level its size fits).
//
// Payload (bytes_per_second) is one input: count * element size. Memory bytes (mem_bytes_per_s)
// are 3x the payload for ReduceInto and Reduce (two arrays read, one written) and (n + 1)x for
// ReduceMany with n sources. ReduceMany2 forwards to Reduce (dispatch.cc), so its rows show only
// what that forwarding costs.
#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

#include "kernel_bench.h"
#include "operands.h"
#include "weft/kernels/dtype.h"
#include "weft/kernels/reduce.h"

namespace weft::kernel_bench {
namespace {

enum class Entry { kReduceInto, kReduce, kReduceMany };

struct ReduceRow {
  Entry entry;
  int sources;  // Source arrays: 1 for ReduceInto (dst is the other operand), 2 for Reduce.
  DataType type;
  ReduceOp op;
  SimdLevel level;
  size_t bytes;
  bool from_l3;
};

void RunReduce(benchmark::State& state, const ReduceRow& row) {
  SetSimdLevelForTesting(row.level);
  const int slots = row.from_l3 ? static_cast<int>(kL3PoolBytes / row.bytes) : 1;
  const ReduceOperands operands(row.type, row.op, row.bytes, row.sources,
                                /*accumulate=*/row.entry == Entry::kReduceInto, slots);
  if (!operands.ok()) {
    state.SkipWithError(("cannot allocate " + std::to_string(row.sources + 1) + " arrays of " +
                         std::to_string(row.bytes * static_cast<size_t>(slots)) + " bytes")
                            .c_str());
    return;
  }
  const size_t count = row.bytes / SizeOf(row.type);
  const std::vector<ReduceOperands::Slot>& all = operands.slots();
  size_t next = 0;
  for (auto _ : state) {
    const ReduceOperands::Slot& slot = all[next];
    next = next + 1 == all.size() ? 0 : next + 1;
    switch (row.entry) {
      case Entry::kReduceInto:
        ReduceInto(row.type, row.op, slot.dst, slot.sources[0], count);
        break;
      case Entry::kReduce:
        Reduce(row.type, row.op, slot.dst, slot.sources[0], slot.sources[1], count);
        break;
      case Entry::kReduceMany:
        ReduceMany(row.type, row.op, slot.dst, slot.sources, row.sources, count);
        break;
    }
  }
  const size_t arrays = row.entry == Entry::kReduceInto ? 3 : static_cast<size_t>(row.sources) + 1;
  ReportRates(state, row.bytes, arrays * row.bytes);
}

std::string EntryName(Entry entry, int sources) {
  switch (entry) {
    case Entry::kReduceInto:
      return "ReduceInto";
    case Entry::kReduce:
      return "Reduce";
    case Entry::kReduceMany:
      break;
  }
  return "ReduceMany" + std::to_string(sources);
}

void Register(const ReduceRow& row, const char* size_label) {
  std::string name = RowName({EntryName(row.entry, row.sources), Name(row.type), Name(row.op),
                              Name(row.level), size_label});
  if (row.from_l3) name += "/l3";
  benchmark::RegisterBenchmark(name.c_str(),
                               [row](benchmark::State& state) { RunReduce(state, row); });
}

// The (type, op) pairs that also get a 64 MiB row.
bool HasMemoryRow(DataType type, ReduceOp op) {
  return (op == ReduceOp::kSum && (type == DataType::kFloat32 || type == DataType::kBFloat16)) ||
         (op == ReduceOp::kMax && type == DataType::kInt32);
}

// Whether a row exists for this entry, op, level and size; see the top of this file.
bool Covered(Entry entry, ReduceOp op, SimdLevel level, SimdLevel best, bool memory_size) {
  if (entry == Entry::kReduceInto) return true;
  if (memory_size) return entry == Entry::kReduce || level == best;
  return level == best || op == ReduceOp::kSum;
}

}  // namespace

void RegisterReduceBenchmarks() {
  const std::vector<SimdLevel> levels = LevelsToSweep();
  const SimdLevel best = levels.back();
  struct Shape {
    Entry entry;
    int sources;
  };
  constexpr Shape kShapes[] = {{Entry::kReduceInto, 1},
                               {Entry::kReduce, 2},
                               {Entry::kReduceMany, 2},
                               {Entry::kReduceMany, 4},
                               {Entry::kReduceMany, 8}};
  constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax};
  for (const Shape& shape : kShapes) {
    for (int t = 0; t < kNumDataTypes; ++t) {
      const auto type = static_cast<DataType>(t);
      for (ReduceOp op : kOps) {
        std::vector<PayloadSize> sizes(std::begin(kCachedSizes), std::end(kCachedSizes));
        if (HasMemoryRow(type, op)) sizes.push_back(kMemorySize);
        for (const PayloadSize& size : sizes) {
          for (SimdLevel level : levels) {
            const bool memory_size = size.bytes == kMemorySize.bytes;
            if (!Covered(shape.entry, op, level, best, memory_size)) continue;
            ReduceRow row{shape.entry, shape.sources, type, op, level, size.bytes, false};
            Register(row, size.label);
            if (shape.entry == Entry::kReduceInto && type == DataType::kFloat32 &&
                op == ReduceOp::kSum && size.bytes <= (size_t{256} << 10)) {
              row.from_l3 = true;
              Register(row, size.label);
            }
          }
        }
      }
    }
  }
}

}  // namespace weft::kernel_bench
