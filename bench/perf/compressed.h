// --compression: all_reduce_perf and reduce_scatter_perf time CompressedAllReduce and
// CompressedReduceScatter (weft/comm/compressed_*.h) on the sizes of their uncompressed rows, and
// check them against the codec's documented result.
//
// Buffers are the tool's own: reduce_scatter's send array (count = ranks x block) and its block
// of results, in or out of place; all_reduce's array. CompressedAllReduce works in place only,
// so an out-of-place all-reduce copies send into recv and runs there: the copy is part of the
// operation the row times, as it would be for a caller with separate buffers.
//
// Each Run is one synchronous operation (the object's Run returns when the result is there), so
// -z changes nothing and -m runs m operations in a row. Error feedback carries over between the
// Runs of one object; the harness makes one per size for the timed loop and a fresh one (zero
// error) per check, whose result is then known from the inputs alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "perf/collective.h"
#include "perf/measurement.h"
#include "perf/test_data.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_all_reduce.h"
#include "weft/comm/compressed_reduce_scatter.h"
#include "weft/comm/compression.h"

namespace weft::perf {

// Whether the tool has a compressed form: all_reduce and reduce_scatter.
bool Compressible(const Collective& collective);

// One compressed collective bound to one layout (sizes of 0 elements run nothing and send
// nothing).
class CompressedOp {
 public:
  // `collective` must be Compressible; `comm` must outlive the result. Collective.
  static absl::StatusOr<std::unique_ptr<CompressedOp>> Create(const Collective& collective,
                                                              Communicator* comm,
                                                              const Layout& layout,
                                                              const CompressionOptions& options);

  // One operation from `send` into `recv` (the harness's pointers, in or out of place).
  absl::Status Run(const void* send, void* recv);

  // What one operation sent from this rank, and what an fp32 ring would have sent (the average
  // over the Runs so far; every Run of an object sends the same).
  WireBytes PerOperation() const;
  // Whether the reduce-scatter (the all-reduce's first half) runs on the ring (else the direct
  // all-to-all).
  bool ring() const {
    return reduce_scatter_ != nullptr ? reduce_scatter_->ring()
                                      : all_reduce_ != nullptr && all_reduce_->ring();
  }

 private:
  explicit CompressedOp(const Layout& layout) : layout_(layout) {}

  Layout layout_;
  std::unique_ptr<CompressedAllReduce> all_reduce_;
  std::unique_ptr<CompressedReduceScatter> reduce_scatter_;
  uint64_t runs_ = 0;
};

// The result of one Run on a fresh object, recomputed from every rank's inputs (`data`, as
// TestData::FillInput writes them) with the codecs in the documented order: the recv_count
// elements `rank`'s receive region must then hold, bit for bit; `ring`: the reduce-scatter's
// (or the all-reduce's first half's) ring path (CompressedOp::ring). Fails only where the codecs
// refuse the options (CompressedOp::Create refuses them first).
absl::StatusOr<std::vector<float>> CompressedExpected(const Collective& collective,
                                                      const Layout& layout,
                                                      const CompressionOptions& options,
                                                      const TestData& data, int rank, int ranks,
                                                      bool ring);

// How many of the `expected.size()` floats at `recv` differ from `expected`, bit for bit.
int64_t CountWrongFloats(const void* recv, const std::vector<float>& expected);

}  // namespace weft::perf
