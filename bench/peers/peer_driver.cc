#include "peer_driver.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace weft::peers {
namespace {

void PrintOnRankZero(const PeerRuntime& runtime, const std::string& text) {
  if (runtime.rank() != 0) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Times one layout at one size and checks it once.
absl::StatusOr<HalfRow> MeasureHalf(const PeerOptions& options, PeerRuntime& runtime,
                                    PeerCase& op) {
  op.buffers().Fill();
  for (int i = 0; i < options.warmup; ++i) {
    if (absl::Status s = op.Run(); !s.ok()) return s;
  }
  if (absl::Status s = runtime.Barrier(); !s.ok()) return s;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.iters; ++i) {
    if (absl::Status s = op.Run(); !s.ok()) return s;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
      options.iters;

  // -a: 0 rank 0's time, 1 the mean, 2 the minimum, 3 the maximum.
  static constexpr PeerRuntime::Combine kHow[] = {
      PeerRuntime::Combine::kSum, PeerRuntime::Combine::kSum, PeerRuntime::Combine::kMin,
      PeerRuntime::Combine::kMax};
  const double mine = (options.average == 0 && runtime.rank() != 0) ? 0 : seconds;
  absl::StatusOr<double> combined = runtime.AllReduceDouble(mine, kHow[options.average]);
  if (!combined.ok()) return combined.status();
  HalfRow half;
  half.seconds = options.average == 1 ? *combined / runtime.size() : *combined;

  if (options.check) {
    op.buffers().Fill();
    if (absl::Status s = op.Run(); !s.ok()) return s;
    absl::StatusOr<double> wrong = runtime.AllReduceDouble(
        static_cast<double>(op.buffers().CountWrong()), PeerRuntime::Combine::kSum);
    if (!wrong.ok()) return wrong.status();
    half.wrong = static_cast<int64_t>(*wrong);
  }
  return half;
}

}  // namespace

absl::StatusOr<int64_t> RunSweep(const PeerOptions& options, Collective collective,
                                 const std::string& banner, PeerRuntime& runtime,
                                 const PeerCaseFactory& make_case) {
  PrintOnRankZero(runtime, TableHeader(collective, banner, options.min_bytes, options.max_bytes,
                                       options.step_factor, options.step_bytes, options.warmup,
                                       options.iters, options.check));
  const int ranks = runtime.size();
  int64_t wrong = 0;
  double busbw_sum = 0;
  int busbw_values = 0;
  for (size_t requested : SweepSizes(options)) {
    const Geometry geometry = GeometryFor(collective, requested, options.type, ranks);
    HalfRow halves[2];
    for (bool in_place : {false, true}) {
      absl::StatusOr<std::unique_ptr<PeerCase>> op = make_case(geometry, in_place);
      if (!op.ok()) return op.status();
      absl::StatusOr<HalfRow> half = MeasureHalf(options, runtime, **op);
      if (!half.ok()) {
        return absl::Status(
            half.status().code(),
            absl::StrCat("rank ", runtime.rank(), " ", Name(collective), " ", geometry.bytes, " B ",
                         in_place ? "in-place" : "out-of-place", ": ", half.status().message()));
      }
      halves[in_place] = *half;
      wrong += half->wrong;
      busbw_sum += BusBandwidth(collective, geometry, ranks, half->seconds);
      ++busbw_values;
    }
    PrintOnRankZero(runtime, TableRow(collective, geometry, options.type, options.op, ranks,
                                      options.check != 0, halves[0], halves[1]));
  }
  PrintOnRankZero(runtime,
                  TableFooter(collective, busbw_values ? busbw_sum / busbw_values : 0, wrong));
  return wrong;
}

}  // namespace weft::peers
