// PowerSgd: data-parallel gradient averaging with PowerSGD's rank-r compression (Vogels et al.):
// each matrix gradient M (n × m, min(n, m) > r) plus its error e is approximated by P·Qᵀ with
//
//   P = (M + e)·Q;  P := average over the ranks;  P := orthonormal columns (Gram–Schmidt);
//   Q = (M + e)ᵀ·P; Q := average over the ranks;  M := P·Qᵀ;  e := (M + e) − P·Qᵀ,
//
// Q warm-started from the previous step (initially the same pseudo-random matrix on every rank),
// so each step is one power iteration. The P's of all matrices travel in one all-reduce and the
// Q's in another: (n + m)·r floats per matrix instead of n·m. Every other gradient (biases,
// norms, small matrices) is averaged uncompressed in one all-reduce. The errors and the Q's are
// this rank's state, saved beside checkpoints (state(), Restore).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "param_layout.h"
#include "weft/comm/communicator.h"

namespace weft::trainer {

class PowerSgd {
 public:
  // Over the tensors of `layout`, whose gradients are at grads + offset. `comm`, `layout` and the
  // gradients must outlive the result. InvalidArgument for rank < 1.
  static absl::StatusOr<std::unique_ptr<PowerSgd>> Create(Communicator* comm,
                                                          const ParamLayout& layout, float* grads,
                                                          int rank, absl::Duration timeout);
  // Collective: every gradient := its compressed (matrices) or exact (others) average.
  absl::Status Reduce();
  // Bytes this rank has sent so far, counted as a ring all-reduce sends them.
  uint64_t wire_bytes() const { return wire_bytes_; }
  // The errors and Q's, back to back, and their restore (the same size, else InvalidArgument).
  std::vector<float> state() const;
  absl::Status Restore(const std::vector<float>& state);

 private:
  struct Matrix {
    float* grad;
    int rows, cols;
    std::vector<float> error, q;  // rows × cols, cols × r
    size_t p_at = 0, q_at = 0;    // in the packed P's and Q's
  };
  PowerSgd(Communicator* comm, int rank, absl::Duration timeout)
      : comm_(comm), r_(rank), timeout_(timeout) {}
  absl::Status AllReduce(std::vector<float>& data, const char* what);

  Communicator* comm_;
  int r_;
  absl::Duration timeout_;
  std::vector<Matrix> matrices_;
  std::vector<std::pair<float*, size_t>> others_;  // gradients averaged whole
  std::vector<float> ps_, qs_, rest_;
  uint64_t wire_bytes_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace weft::trainer
