// CostModel: the measured speeds the tuner prices algorithms with, and its text format.
//
// Each class has a latency alpha (per message or per operation) and a bandwidth (bytes per
// second, beta = 1 / bandwidth), as in the alpha-beta model and NCCL's tuner:
//   shm         a ring step between ranks of one node over shared-memory links;
//   net         a ring step between nodes;
//   shm_direct.COLLECTIVE, cma_direct.COLLECTIVE  (COLLECTIVE: all_reduce, reduce_scatter,
//               all_gather, broadcast)
//               one whole collective of a single-host direct algorithm: alpha is its fixed
//               cost; its bytes move at cached_gbps up to kCachedBytes, where they still fit in
//               a core's caches, and at gbps beyond. The direct algorithms are memory copies,
//               so the caches decide which one wins at mid sizes, and the collectives differ in
//               how many copies they make: each is measured on its own.
// plus the bandwidth of the reduction kernel (gamma). Calibration measures every class with all
// ranks of the group busy at once, as in real use, so an entry is kept per group size ("shm.4":
// four ranks of a node); an entry without a size applies to any size.
//
// The text form is one "key value" per line ('#' starts a comment), e.g.
//   shm.alpha_us 0.9        shm.4.gbps 3.2          net.2.alpha_us 25
//   net.gbps 1.1            reduce.gbps 9           shm_direct.all_gather.2.alpha_us 1.5
//   cma_direct.all_reduce.2.gbps 3    cma_direct.all_reduce.2.cached_gbps 12
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
  double alpha_us = 0;     // microseconds
  double gbps = 0;         // 1e9 bytes per second
  double cached_gbps = 0;  // up to CostModel::kCachedBytes, where given (else gbps)

  double alpha() const { return alpha_us * 1e-6; }
  double beta() const { return 1.0 / (gbps * 1e9); }
  // alpha plus `bytes` at the cached bandwidth up to kCachedBytes and at gbps beyond.
  double Time(double bytes) const;
};

class CostModel {
 public:
  // The size at which calibration times the direct algorithms inside the caches: up to it their
  // input, output and arena fit in a core's L2 (1.25 MiB on the development machines); beyond
  // it more and more of their copies go to memory.
  static constexpr size_t kCachedBytes = 512 << 10;

  // The class of direct algorithm `algorithm` ("shm_direct", "cma_direct") for `collective`.
  static std::string DirectClass(absl::string_view algorithm, absl::string_view collective);

  // The cost of class `name` ("shm", "net", or a DirectClass) for a group of `ranks`:
  // the entry for that size, else the size-less entry, else the nearest measured size (a direct
  // algorithm's bandwidth scaled by the ratio of sizes: the ranks share the memory bus), else the
  // built-in default (for the direct algorithms: three passes over the data at shm speed).
  LinkCost Get(absl::string_view name, int ranks) const;
  // Whether `name` has an entry of its own for `ranks` (0: size-less).
  bool Has(absl::string_view name, int ranks) const;
  void Set(absl::string_view name, int ranks, LinkCost cost);

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
  double reduce_gbps_ = 8.0;
  bool has_reduce_ = false;
  std::string source_ = "built-in defaults";
};

}  // namespace weft
