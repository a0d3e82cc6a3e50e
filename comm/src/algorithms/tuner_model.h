// CostModel: the alpha-beta costs the tuner prices algorithms with, and the tuning-file format.
//
// Every entry is a latency alpha (microseconds) and a bandwidth (1e9 bytes per second,
// beta = 1 / bandwidth), NCCL-style time = alpha + bytes * beta, for a class:
//   shm         a ring step between ranks of one node over shared-memory links;
//   net         a ring step between nodes while every lane (hierarchical.h) runs one at once;
//   net_flow    the same step while one lane alone runs it: what a ring or a tree across nodes
//               gets (only its bandwidth is used);
//   shm_direct.COLLECTIVE, cma_direct.COLLECTIVE, cma_direct_shared.COLLECTIVE
//               one whole collective (all_reduce, reduce_scatter, all_gather, broadcast) by a
//               one-host direct algorithm; cma_direct_shared: cma_direct over AllocShared buffers.
// plus the bandwidth of the reduction kernel (gamma = 1 / reduce.gbps). An entry may be kept per
// group size ("shm.4": four ranks of a node); Get takes that size's, else the size-less one, else
// the nearest size's, else the built-in default. The built-in defaults come from `weft-tune` on a
// 2-core VM (one host) and a 2 x 2 network-namespace rig, so that a job without a tuning file
// still picks sensibly.
//
// The text form, which `weft-tune` writes and WEFT_TUNING_FILE names, is one "KEY VALUE" a line
// ('#' starts a comment): reduce.gbps, or CLASS[.RANKS].alpha_us / CLASS[.RANKS].gbps, e.g.
//   shm.4.alpha_us 3.5   shm.4.gbps 6   net.gbps 1.1   shm_direct.all_gather.2.alpha_us 0.7
// A file may hold any subset; what it lacks keeps the built-in defaults.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft {

struct LinkCost {
  double alpha_us = 0;  // microseconds
  double gbps = 0;      // 1e9 bytes per second

  double alpha() const { return alpha_us * 1e-6; }
  double beta() const { return 1.0 / (gbps * 1e9); }
};

class CostModel {
 public:
  static constexpr char kNetFlow[] = "net_flow";
  static constexpr char kCmaDirectShared[] = "cma_direct_shared";
  // The group size the built-in defaults of the direct classes were measured on.
  static constexpr int kDefaultRanks = 2;

  // "shm_direct.all_reduce": the class of a direct algorithm's collective.
  static std::string CollectiveClass(absl::string_view algorithm, absl::string_view collective);

  // The cost of class `name` for a group of `ranks`, found as the header says; *measured_ranks
  // (if given) receives the group size it was measured on.
  LinkCost Get(absl::string_view name, int ranks, int* measured_ranks = nullptr) const;
  void Set(absl::string_view name, int ranks, LinkCost cost);

  double reduce_gbps() const { return reduce_gbps_; }
  double gamma() const { return 1.0 / (reduce_gbps_ * 1e9); }
  void set_reduce_gbps(double gbps) { reduce_gbps_ = gbps; }

  // Where the numbers come from: "built-in defaults" or the tuning file's path.
  const std::string& source() const { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }

  // Parses the text form into this model; errors name `origin` and the line.
  absl::Status Merge(absl::string_view text, absl::string_view origin);
  std::string Format() const;

 private:
  std::map<std::pair<std::string, int>, LinkCost> classes_;  // (class, ranks; 0: any)
  double reduce_gbps_ = 30.0;
  std::string source_ = "built-in defaults";
};

}  // namespace weft
