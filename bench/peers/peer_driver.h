// The nccl-tests measurement method, independent of the library measured: per size, out-of-place
// then in-place; warmup operations, a barrier, a timed loop of `iters` blocking operations, the
// time per operation combined over ranks (-a), then one checked operation on fresh inputs with
// the wrong elements summed over ranks. Rank 0 prints the table.
//
// A harness supplies the library's rank-level services (PeerRuntime) and, per size and layout,
// an operation set up outside the timed loop (PeerCase).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nccl_format.h"
#include "peer_buffers.h"
#include "peer_options.h"

namespace weft::peers {

class PeerRuntime {
 public:
  enum class Combine { kSum, kMin, kMax };

  virtual ~PeerRuntime() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual absl::Status Barrier() = 0;
  // `value` combined over all ranks; every rank gets the result.
  virtual absl::StatusOr<double> AllReduceDouble(double value, Combine how) = 0;
};

// One collective at one size and layout, ready to run repeatedly.
class PeerCase {
 public:
  virtual ~PeerCase() = default;
  virtual PeerBuffers& buffers() = 0;
  // One blocking operation from buffers().send() into buffers().recv().
  virtual absl::Status Run() = 0;
};

using PeerCaseFactory = std::function<absl::StatusOr<std::unique_ptr<PeerCase>>(
    const Geometry& geometry, bool in_place)>;

// Runs the sweep of `options` and prints one table headed by `banner`. Returns the wrong
// elements over all sizes and ranks, or the first failure of the library.
absl::StatusOr<int64_t> RunSweep(const PeerOptions& options, Collective collective,
                                 const std::string& banner, PeerRuntime& runtime,
                                 const PeerCaseFactory& make_case);

}  // namespace weft::peers
