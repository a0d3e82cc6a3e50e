// CostModel: the measured speeds the tuner prices algorithms with, and its text format.
//
// The link classes have a latency alpha (per message) and a bandwidth (bytes per second,
// beta = 1 / bandwidth), as in the alpha-beta model and NCCL's tuner:
//   shm         a ring step between ranks of one node over shared-memory links;
//   net         a ring step between nodes, while every lane of the nodes (hierarchical.h) runs
//               one at once, as the hierarchical algorithms do;
//   net_flow    the same step while one lane alone runs it: the bandwidth a ring or a tree
//               across nodes gets, with one message at a time on each node's link. Where the
//               lanes share one NIC it is about lanes times net's; where each has its own, the
//               same. (Its latency is not used: with most ranks idle it says little.)
// plus the bandwidth of the reduction kernel (gamma). The single-host direct algorithms are
// memory copies, whose speed per byte changes with size as their buffers outgrow the caches, and
// the collectives differ in how many copies they make: each collective of each has a time curve
// of its own,
//   shm_direct.COLLECTIVE, cma_direct.COLLECTIVE  (COLLECTIVE: all_reduce, reduce_scatter,
//               all_gather, broadcast)
//               the time of one whole collective at a few sizes (see TimeCurve);
//   cma_direct_shared.COLLECTIVE
//               the same for cma_direct over buffers from AllocShared, measured only for
//               communicators that say they use them (CommOptions::shared_buffers).
// Over several nodes the algorithms that run over links are priced by formulas over the link
// classes, and each collective of each also has an anchor,
//   ring.COLLECTIVE and rabenseifner.COLLECTIVE (all_reduce, reduce_scatter, all_gather),
//   recursive_doubling.all_reduce, tree.broadcast, hierarchical.COLLECTIVE
//               the time of one whole collective at a few sizes (the points of a
//               TimeCurve). A formula composes the fixed cost from the links' alphas, but a
//               whole algorithm also waits for what no link's alpha holds: the hand-offs between
//               its phases and between the ranks of a node, and where ranks share cores, the
//               scheduler. The network-namespace rig's hierarchical all-reduce measured
//               1.2-1.8x slower than Rabenseifner's below 32 KiB where the formulas priced the
//               two alike. The tuner moves a formula by what separates it from its anchors:
//               between two, by a straight line between their differences; beyond the last, by
//               the last one's.
// Calibration measures everything else with all ranks of the group busy at once, as in real use,
// so an entry is kept per group size ("shm.4": four ranks of a node); an entry without a size
// applies to any size.
//
// The text form is one "key value" per line ('#' starts a comment), e.g.
//   shm.alpha_us 0.9        shm.4.gbps 3.2          net.2.alpha_us 25
//   net.gbps 1.1            reduce.gbps 9
//   shm_direct.all_gather.2.us_at_256 1.5           shm_direct.all_gather.2.us_at_524288 40
//   hierarchical.all_reduce.4.us_at_256 80
// A file may hold any subset; what it lacks keeps the built-in defaults (and calibration measures
// it when it runs). WEFT_TUNING_FILE names such a file; the per-host cache uses the same format.
#pragma once

#include <cstddef>
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

// Measured times of one collective at a few sizes. Between two of them the time is interpolated
// linearly; below the smallest it is the smallest's (the fixed cost); beyond the largest it grows
// at the rate of the last segment.
class TimeCurve {
 public:
  void Set(size_t bytes, double us) { points_[bytes] = us; }
  // Seconds for a collective of `bytes`; needs two points at least (usable()). Below the first
  // point its time, between two a straight line, beyond the last the line from the first point
  // through the last.
  double Seconds(double bytes) const;
  bool usable() const { return points_.size() >= 2; }
  const std::map<size_t, double>& points() const { return points_; }  // bytes -> microseconds

 private:
  std::map<size_t, double> points_;
};

class CostModel {
 public:
  // The class of `algorithm`'s `collective` that a curve or an anchor is kept under: a direct
  // algorithm ("shm_direct", "cma_direct", or kCmaDirectShared: cma_direct over buffers from
  // AllocShared), or one of those that run over links.
  static std::string CollectiveClass(absl::string_view algorithm, absl::string_view collective);
  static constexpr char kCmaDirectShared[] = "cma_direct_shared";
  static constexpr char kNetFlow[] = "net_flow";

  // The cost of link class `name` ("shm", "net", kNetFlow) for a group of `ranks`: the entry for
  // that size, else the size-less entry, else the nearest measured size, else the built-in
  // default; net_flow without any entry is net's (a flow alone is no slower than in company).
  LinkCost Get(absl::string_view name, int ranks) const;
  // The time of a collective of `bytes` by direct class `name` (CollectiveClass) on `ranks`, from
  // its curve found the same way; from the nearest size, what the bytes add is scaled by the
  // ratio of sizes (the ranks share the memory bus). Never measured: three passes over the data
  // at the shm class's speed.
  double DirectSeconds(absl::string_view name, int ranks, double bytes) const;
  // The anchors of link algorithm class `name` (CollectiveClass) on `ranks`, or nullptr. Only
  // anchors measured on that many ranks (or size-less ones) count: the hand-offs they hold change
  // with the group.
  const TimeCurve* Anchors(absl::string_view name, int ranks) const;
  // Whether `name` has an entry of its own for `ranks` (0: size-less).
  bool Has(absl::string_view name, int ranks) const;
  void Set(absl::string_view name, int ranks, LinkCost cost);
  void SetCurve(absl::string_view name, int ranks, TimeCurve curve);

  double reduce_gbps() const { return reduce_gbps_; }
  double gamma() const { return 1.0 / (reduce_gbps_ * 1e9); }
  bool has_reduce() const { return has_reduce_; }
  void set_reduce_gbps(double gbps);

  const std::string& source() const { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }

  // Parses the text form into this model; errors name the line.
  absl::Status Merge(absl::string_view text, absl::string_view origin);
  std::string Format() const;

 private:
  std::map<std::pair<std::string, int>, LinkCost> classes_;
  std::map<std::pair<std::string, int>, TimeCurve> curves_;
  double reduce_gbps_ = 8.0;
  bool has_reduce_ = false;
  std::string source_ = "built-in defaults";
};

}  // namespace weft
