// The command line of the peer harnesses (mpi_peer, gloo_peer): nccl-tests' flags, so that one
// size list, type and iteration count drive Weft's *_perf tools and the peers alike, plus the
// few flags a peer needs to pick its collective, algorithms or rendezvous directory.
//
//   -b/-e/-f/-i sizes, -n iters, -w warmup, -c check, -a average, -o op, -d type, -T timeout
//   --collective NAME   all_reduce | reduce_scatter | all_gather | broadcast  (mpi_peer)
//   --algorithm LIST    comma-separated algorithm names, default every one   (gloo_peer)
//   --store DIR         rendezvous directory shared by the ranks             (gloo_peer)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weft/kernels/dtype.h"

namespace weft::peers {

struct PeerOptions {
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  double step_factor = 1;  // > 1: multiplicative steps (-f); otherwise additive (-i)
  size_t step_bytes = 1 << 20;
  int iters = 20;
  int warmup = 1;
  int check = 1;
  int average = 1;  // per-rank time combined as 0 rank 0's, 1 mean, 2 min, 3 max
  int timeout_s = 0;
  ReduceOp op = ReduceOp::kSum;
  DataType type = DataType::kFloat32;
  std::string collective = "all_reduce";
  std::vector<std::string> algorithms;
  std::string store_dir;
};

// The usage text, for `prog`.
std::string PeerUsage(const char* prog);

// Parses argv. Fails with InvalidArgument naming the flag and value it could not take. Types are
// limited to those every peer library reduces natively (int32, float, double) and operators to
// sum, prod, min and max.
absl::StatusOr<PeerOptions> ParsePeerOptions(int argc, char** argv);

// The requested sizes in bytes, from min to max by step, as nccl-tests walks them.
std::vector<size_t> SweepSizes(const PeerOptions& options);

}  // namespace weft::peers
