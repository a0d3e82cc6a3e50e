// What nccl-tests means by a collective's size, count and bus bandwidth, and how it prints them:
// the peer harnesses print the same table as Weft's *_perf tools so that one parser reads all.
// ../shared/specs/nccl-tests.md is the reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "weft/kernels/dtype.h"

namespace weft::peers {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

std::optional<Collective> ParseCollective(absl::string_view name);
// "all_reduce", "reduce_scatter", "all_gather", "broadcast".
const char* Name(Collective collective);

// The element counts of one operation for a requested size. For reduce_scatter and all_gather
// the per-rank count is size/ranks rounded down to 16 bytes and `bytes` the total over ranks.
struct Geometry {
  size_t count = 0;       // the count column: what the collective call is given
  size_t send_count = 0;  // elements each rank sends
  size_t recv_count = 0;  // elements each rank receives
  size_t bytes = 0;       // the size column: max(send, recv) bytes
};
Geometry GeometryFor(Collective collective, size_t requested_bytes, DataType type, int ranks);

// busbw / algbw: 2(n-1)/n for all_reduce, (n-1)/n for reduce_scatter and all_gather, 1 for
// broadcast.
double BusBandwidthFactor(Collective collective, int ranks);

// Decimal GB/s over the link bottleneck for one operation of `seconds`.
double BusBandwidth(Collective collective, const Geometry& geometry, int ranks, double seconds);

// One half (out-of-place or in-place) of a row.
struct HalfRow {
  double seconds = 0;  // per operation, combined over ranks
  int64_t wrong = 0;   // wrong elements over all ranks; unused when unchecked
};

// The table's opening comment lines and column headings; every line of `banner` is printed
// after "# " (the library and its transport, an algorithm name).
std::string TableHeader(Collective collective, const std::string& banner, size_t min_bytes,
                        size_t max_bytes, double step_factor, size_t step_bytes, int warmup,
                        int iters, int check);
std::string TableRow(Collective collective, const Geometry& geometry, DataType type, ReduceOp op,
                     int ranks, bool checked, const HalfRow& out_of_place, const HalfRow& in_place);
// `wrong`: the wrong elements of the whole sweep (OK when 0, FAILED otherwise).
std::string TableFooter(Collective collective, double average_busbw, int64_t wrong);

}  // namespace weft::peers
