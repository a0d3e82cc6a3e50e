// The measurement loop, as nccl-tests' TimeTest and BenchTime run it:
//
//   for each type, operator and root the options select:
//     barrier; warm up every size (doubling from -b) with -w out-of-place operations
//     for each cycle (-N) and size:  out-of-place, then in-place:
//       fill the inputs; one untimed operation; barrier
//       timer around -n iterations of -m operations, until the last completes
//       time = elapsed / (n m), combined across ranks by -a; barrier
//       -c checks: fresh inputs (a new seed), one operation, compare bit for bit, sum over ranks
//
// With -P each size also asks the communicator which algorithm it runs and what the tuner
// predicts for it (Communicator::AlgorithmFor, PredictedSeconds), for the row's extra columns.
//
// With -V several variants (communicators that force different algorithms, or none) are
// measured in one run: each warms up in turn, then at every size of every cycle each times its
// row, the variant that goes first rotating from one size to the next.
//
// With --compression (all_reduce, reduce_scatter) each operation is a Run of the compressed
// collective (perf/compressed.h): one object per size, made before the untimed operation, and a
// fresh one for each check, compared with the documented result of the inputs.
//
// Timed iteration i works at offset (i mod (max size / size)) x size into buffers of the largest
// size, so consecutive operations do not reuse the same cache lines; checks use offset 0, so the
// timed iterations cannot affect them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "perf/collective.h"
#include "perf/compressed.h"
#include "perf/options.h"
#include "perf/report.h"
#include "weft/comm/communicator.h"

namespace weft::perf {

// One communicator a run measures: without -V the only one (unnamed), with -V one per variant.
struct Variant {
  std::string name;  // -V's name: "auto" or an algorithm; empty without -V
  Communicator* comm;
};

class Benchmark {
 public:
  // `variants` holds at least one; its communicators (of the same ranks) and all references must
  // outlive the Benchmark.
  Benchmark(std::vector<Variant> variants, const Options& options, const Collective& collective,
            Report& report);
  ~Benchmark();

  // Collective: every rank calls it with the same options. Fails on the first error of the
  // communicator (the rows measured so far are in the report); wrong values are not errors.
  absl::Status Run();

 private:
  // One (size, type, operator, root, placement): what every helper below works on.
  struct Case {
    Layout layout;
    DataType type;
    ReduceOp op;
    int root;
    bool in_place;
    size_t bytes;  // max(send, receive) bytes: the table's size
  };
  struct Pointers {
    const void* send;
    void* recv;
  };

  absl::Status TimeTest(DataType type, ReduceOp op, int root);
  // The current variant's warm-up: -w operations of every size from -b, doubling.
  absl::Status WarmUp(DataType type, ReduceOp op, int root);
  // The current variant's row for one size: both halves, reported.
  absl::Status TimeRow(int cycle, size_t size, DataType type, ReduceOp op, int root,
                       const std::string& variant);
  absl::Status BenchTime(const Case& c, Measurement* out);
  // -P's algorithm and predicted time for the case (without the measured ratio); empty without -P.
  std::optional<Prediction> Predict(const Case& c) const;
  // Where iteration `iter` sends from and receives into.
  Pointers At(const Case& c, int iter) const;
  // Issues the operation of iteration `iter`; with -z waits for it (and with -z 1 barriers) unless
  // it is part of an open group.
  absl::StatusOr<Work> Issue(const Case& c, int iter, bool in_group);
  // The -c checks. Empty when nothing is checked (-c 0, or an in-place result without meaning).
  absl::StatusOr<std::optional<int64_t>> Check(const Case& c);
  // The per-operation time as -a combines it across ranks.
  absl::StatusOr<double> CombineTime(double seconds);
  absl::Status Barrier();
  void InjectErrors(const Case& c, void* recv) const;
  // With --compression, a new compressed_ (zero error feedback) for the case; else nothing.
  absl::Status Compress(const Case& c);
  Case MakeCase(size_t size, DataType type, ReduceOp op, int root, bool in_place) const;

  const std::vector<Variant> variants_;
  Communicator* comm_;  // the variant being measured
  const Options& options_;
  const Collective& collective_;
  Report& report_;
  const int rank_;
  const int ranks_;
  size_t buffer_bytes_ = 0;
  std::unique_ptr<std::byte, void (*)(void*)> send_buffer_;
  std::unique_ptr<std::byte, void (*)(void*)> recv_buffer_;
  std::unique_ptr<CompressedOp> compressed_;  // --compression: what Issue runs
  uint64_t check_seed_ = 0;  // a new seed per check, so no check can pass on stale data
};

}  // namespace weft::perf
