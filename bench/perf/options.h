// The *_perf command line: nccl-tests' flags, defaults and meanings, plus Weft's -A, -P and -V.
//
// The project's nccl-tests contract (shared/specs/nccl-tests.md) lists what is mirrored. GPU-
// and thread-specific flags (-t, -g, -p, -y, -G) are accepted so that existing scripts run;
// each process is one rank, so they select nothing (a value that would ask for more is reported
// on stderr and ignored).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weft/comm/compression.h"
#include "weft/kernels/dtype.h"

namespace weft::perf {

struct Options {
  size_t min_bytes = size_t{32} << 20;           // -b
  size_t max_bytes = size_t{32} << 20;           // -e
  size_t step_bytes = size_t{1} << 20;           // -i: additive step, used when step_factor is 1
  int64_t step_factor = 1;                       // -f: multiplicative step; 1 = off
  int iters = 20;                                // -n: timed iterations
  int warmup_iters = 1;                          // -w
  int agg_iters = 1;                             // -m: operations per timed iteration
  int run_cycles = 1;                            // -N: repeat the size sweep; 0 = forever
  int check = 1;                                 // -c: correctness iterations; 0 prints N/A
  std::vector<ReduceOp> ops = {ReduceOp::kSum};  // -o (all = sum prod max min avg)
  std::vector<DataType> types = {DataType::kFloat32};  // -d (all = nccl-tests' order)
  int root = 0;                                        // -r: -1 runs every root
  int blocking = 0;             // -z: 1 waits and barriers after each op, 2 only waits
  int average = 1;              // -a: time across ranks: 0 rank 0's, 1 mean, 2 min, 3 max
  int timeout_s = 0;            // -T: bound on the whole run; 0 = none
  bool report_cputime = false;  // -C: report the time to issue instead of to complete
  int unalign = 0;              // -u: buffers start this many elements past an aligned address
  // -R: 1 or 2 allocates the buffers with weft::AllocShared, as nccl-tests registers them with
  // NCCL, so that same-host peers read them in place.
  int local_register = 0;
  std::string output_file;  // -J: JSON report (rank 0 writes it)
  std::string algorithm;    // -A: CommOptions::algorithm (else WEFT_ALGO)
  // -P 1: every row also shows the algorithm that ran, the tuner's predicted time for it and
  // measured/predicted per half (columns after nccl-tests' own, so the default table stays
  // theirs, character for character).
  bool predicted = false;
  // -V: algorithms ("auto" for the tuner's choice) timed side by side in one run, each on a
  // communicator of its own, taking turns at every size of every cycle, so that all of them see
  // the same state of the machine; each gets its own row, with -P's columns and its name.
  std::vector<std::string> variants;
  // --inject_errors N, a debugging aid: after each check operation, every checking rank flips
  // one bit in the first N elements it received, which proves that wrong values reach #wrong,
  // the footer, the JSON report and the exit status (e.g. when validating a CI pipeline).
  int64_t inject_errors = 0;
  // --compression CODEC (with --compression_block, --topk_ratio): all_reduce_perf and
  // reduce_scatter_perf time CompressedAllReduce / CompressedReduceScatter instead (fp32, the
  // average; see perf/compressed.h). Empty: the uncompressed collectives.
  std::optional<CompressionOptions> compression;
  bool help = false;              // -h: print Usage() and exit 0
  std::vector<std::string> args;  // argv, for the JSON report
};

// Why a flag was ignored, one line each (GPU-specific values); empty when nothing was.
struct ParsedOptions {
  Options options;
  std::vector<std::string> notes;
};

// Fails with InvalidArgument naming the flag and its value.
absl::StatusOr<ParsedOptions> ParseOptions(int argc, char** argv);

// The --help text for `program`.
std::string Usage(const std::string& program);

}  // namespace weft::perf
