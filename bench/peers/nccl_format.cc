#include "nccl_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "perf/table.h"

namespace weft::peers {
namespace {

// Rounds a per-rank element count down to a multiple of 16 bytes, as nccl-tests does.
size_t Align16(size_t count, size_t element_size) {
  const size_t step = element_size < 16 ? 16 / element_size : 1;
  return count / step * step;
}

}  // namespace

std::optional<Collective> ParseCollective(absl::string_view name) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast}) {
    if (name == Name(c)) return c;
  }
  return std::nullopt;
}

const char* Name(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

Geometry GeometryFor(Collective collective, size_t requested_bytes, DataType type, int ranks) {
  const size_t es = SizeOf(type);
  const size_t elements = requested_bytes / es;
  Geometry g;
  switch (collective) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
      g.count = g.send_count = g.recv_count = elements;
      break;
    case Collective::kReduceScatter:
      g.count = g.recv_count = Align16(elements / ranks, es);
      g.send_count = g.recv_count * ranks;
      break;
    case Collective::kAllGather:
      g.count = g.send_count = Align16(elements / ranks, es);
      g.recv_count = g.send_count * ranks;
      break;
  }
  g.bytes = std::max(g.send_count, g.recv_count) * es;
  return g;
}

double BusBandwidthFactor(Collective collective, int ranks) {
  switch (collective) {
    case Collective::kAllReduce:
      return 2.0 * (ranks - 1) / ranks;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      return static_cast<double>(ranks - 1) / ranks;
    case Collective::kBroadcast:
      return 1;
  }
  return 1;
}

double BusBandwidth(Collective collective, const Geometry& geometry, int ranks, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(geometry.bytes) / seconds / 1e9 *
         BusBandwidthFactor(collective, ranks);
}

std::string TableHeader(Collective collective, const std::string& banner, size_t min_bytes,
                        size_t max_bytes, double step_factor, size_t step_bytes, int warmup,
                        int iters, int check) {
  std::string out = "# nccl-tests-compatible weft peer harness\n";
  for (absl::string_view line : absl::StrSplit(banner, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "# ", line, "\n");
  }
  const std::string step = step_factor > 1 ? absl::StrFormat("%g(factor)", step_factor)
                                           : absl::StrFormat("%zu(bytes)", step_bytes);
  absl::StrAppendFormat(&out, "# Collective test starting: %s_perf\n", Name(collective));
  absl::StrAppendFormat(&out,
                        "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d "
                        "iters: %d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
                        min_bytes, max_bytes, step, warmup, iters, check);
  return out + perf::ResultHeader(/*cputime=*/false);
}

std::string TableRow(Collective collective, const Geometry& geometry, DataType type, ReduceOp op,
                     int ranks, bool checked, const HalfRow& out_of_place,
                     const HalfRow& in_place) {
  const bool reduces =
      collective == Collective::kAllReduce || collective == Collective::kReduceScatter;
  const int root = collective == Collective::kBroadcast ? 0 : -1;
  std::string row =
      perf::RowPreamble(static_cast<int64_t>(geometry.bytes), static_cast<int64_t>(geometry.count),
                        Name(type), reduces ? Name(op) : "none", root);
  for (const HalfRow* half : {&out_of_place, &in_place}) {
    const double algbw = half->seconds > 0 ? geometry.bytes / half->seconds / 1e9 : 0;
    const double busbw = BusBandwidth(collective, geometry, ranks, half->seconds);
    row += perf::RowHalf(half->seconds * 1e6, algbw, busbw,
                         checked ? std::optional<int64_t>(half->wrong) : std::nullopt);
  }
  return row + "\n";
}

std::string TableFooter(Collective collective, double average_busbw, int64_t wrong) {
  return perf::Footer(static_cast<int>(wrong), average_busbw, std::nullopt,
                      absl::StrCat(Name(collective), "_perf")) +
         "\n";
}

}  // namespace weft::peers
