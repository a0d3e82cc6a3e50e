// The buffers of one collective at one size on one rank, with inputs whose results are exact and
// order-independent (common/expected_values.h, the data Weft's own tools use) and the check of
// the result: what every peer harness shares, whichever library moves the bytes.
//
// Layouts. Out-of-place: separate send and recv buffers. In-place: one buffer; send() points at
// this rank's input inside it (the whole buffer for all_reduce, reduce_scatter and broadcast,
// block `rank` for all_gather) and the result is expected at recv(), its start. That is MPI's
// MPI_IN_PLACE convention; for all_reduce, all_gather and broadcast it is also nccl-tests'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nccl_format.h"
#include "weft/kernels/dtype.h"

namespace weft::peers {

class PeerBuffers {
 public:
  PeerBuffers(Collective collective, const Geometry& geometry, DataType type, ReduceOp op, int rank,
              int ranks, bool in_place);

  void* send() { return send_; }
  void* recv() { return recv_; }
  const Geometry& geometry() const { return geometry_; }
  bool in_place() const { return in_place_; }

  // Writes this rank's inputs (and, for broadcast, a value no root input has into the
  // receivers' buffers): called before the checked operation, since timed operations that
  // reduce in place leave other values behind.
  void Fill();

  // Elements of recv() that differ, bit for bit, from the expected result after one operation
  // on Fill()ed inputs.
  int64_t CountWrong() const;

 private:
  // The input of `rank` at global element `index`.
  void StoreInput(int rank, size_t index, std::byte* out) const;

  Collective collective_;
  Geometry geometry_;
  DataType type_;
  ReduceOp op_;
  int rank_, ranks_;
  bool in_place_;
  size_t element_size_;
  std::vector<std::byte> first_, second_;  // in-place uses first_ only
  std::byte* send_;
  std::byte* recv_;
};

}  // namespace weft::peers
