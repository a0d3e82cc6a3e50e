#include "powersgd.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "rng.h"

namespace weft::trainer {

absl::StatusOr<std::unique_ptr<PowerSgd>> PowerSgd::Create(Communicator* comm,
                                                           const ParamLayout& layout, float* grads,
                                                           int rank, absl::Duration timeout) {
  if (rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat("PowerSGD: rank ", rank, " must be >= 1"));
  }
  std::unique_ptr<PowerSgd> p(new PowerSgd(comm, rank, timeout));
  size_t p_at = 0, q_at = 0;
  for (const TensorView& t : layout.tensors()) {
    float* g = grads + t.offset;
    if (t.shape.size() != 2 || std::min(t.shape[0], t.shape[1]) <= rank) {
      p->others_.push_back({g, t.size});
      continue;
    }
    Matrix m{g,
             t.shape[0],
             t.shape[1],
             std::vector<float>(t.size, 0.0f),
             std::vector<float>(static_cast<size_t>(t.shape[1]) * rank),
             p_at,
             q_at};
    // The same start on every rank: a pure function of the tensor's name and element.
    for (size_t i = 0; i < m.q.size(); ++i) m.q[i] = IndexedNormal(0x9d5c, t.name, i);
    p_at += static_cast<size_t>(m.rows) * rank;
    q_at += m.q.size();
    p->matrices_.push_back(std::move(m));
  }
  p->ps_.resize(p_at);
  p->qs_.resize(q_at);
  size_t rest = 0;
  for (const auto& [g, n] : p->others_) rest += n;
  p->rest_.resize(rest);
  return p;
}

absl::Status PowerSgd::AllReduce(std::vector<float>& data, const char* what) {
  if (data.empty()) return absl::OkStatus();
  const int n = comm_->size();
  wire_bytes_ += 2 * data.size() * sizeof(float) * (n - 1) / n;
  absl::Status s =
      comm_->AllReduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kAvg)
          .Wait(timeout_);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("rank ", comm_->rank(), ": PowerSGD call ", calls_,
                                             ": all-reduce of ", what, ": ", s.message()));
}

absl::Status PowerSgd::Reduce() {
  ++calls_;
  const int r = r_;
  // M += e; P = M·Q.
  for (Matrix& m : matrices_) {
    const size_t size = static_cast<size_t>(m.rows) * m.cols;
    for (size_t i = 0; i < size; ++i) m.grad[i] += m.error[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m.rows, r, m.cols, 1.0f, m.grad, m.cols,
                m.q.data(), r, 0.0f, ps_.data() + m.p_at, r);
  }
  if (absl::Status s = AllReduce(ps_, "the P factors"); !s.ok()) return s;
  // Orthonormal columns of each P (modified Gram–Schmidt, in double), then Q = Mᵀ·P.
  for (Matrix& m : matrices_) {
    float* p = ps_.data() + m.p_at;
    for (int c = 0; c < r; ++c) {
      for (int d = 0; d < c; ++d) {
        double dot = 0;
        for (int i = 0; i < m.rows; ++i) dot += static_cast<double>(p[i * r + c]) * p[i * r + d];
        for (int i = 0; i < m.rows; ++i) p[i * r + c] -= static_cast<float>(dot) * p[i * r + d];
      }
      double norm = 0;
      for (int i = 0; i < m.rows; ++i) norm += static_cast<double>(p[i * r + c]) * p[i * r + c];
      const float scale = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
      for (int i = 0; i < m.rows; ++i) p[i * r + c] *= scale;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m.cols, r, m.rows, 1.0f, m.grad, m.cols, p,
                r, 0.0f, qs_.data() + m.q_at, r);
  }
  if (absl::Status s = AllReduce(qs_, "the Q factors"); !s.ok()) return s;
  // M := P·Qᵀ, the error what it leaves out; the next step starts from this Q.
  for (Matrix& m : matrices_) {
    const size_t size = static_cast<size_t>(m.rows) * m.cols;
    std::copy(m.grad, m.grad + size, m.error.begin());
    std::copy(qs_.begin() + m.q_at, qs_.begin() + m.q_at + m.q.size(), m.q.begin());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m.rows, m.cols, r, 1.0f,
                ps_.data() + m.p_at, r, m.q.data(), r, 0.0f, m.grad, m.cols);
    for (size_t i = 0; i < size; ++i) m.error[i] -= m.grad[i];
  }
  size_t at = 0;
  for (const auto& [g, n] : others_) {
    std::copy(g, g + n, rest_.begin() + at);
    at += n;
  }
  if (absl::Status s = AllReduce(rest_, "the uncompressed gradients"); !s.ok()) return s;
  at = 0;
  for (const auto& [g, n] : others_) {
    std::copy(rest_.begin() + at, rest_.begin() + at + n, g);
    at += n;
  }
  return absl::OkStatus();
}

std::vector<float> PowerSgd::state() const {
  std::vector<float> all;
  for (const Matrix& m : matrices_) {
    all.insert(all.end(), m.error.begin(), m.error.end());
    all.insert(all.end(), m.q.begin(), m.q.end());
  }
  return all;
}

absl::Status PowerSgd::Restore(const std::vector<float>& state) {
  size_t need = 0;
  for (const Matrix& m : matrices_) need += m.error.size() + m.q.size();
  if (state.size() != need) {
    return absl::InvalidArgumentError(absl::StrCat("PowerSGD: ", state.size(), " saved values for ",
                                                   need, " (a different model or rank)"));
  }
  size_t at = 0;
  for (Matrix& m : matrices_) {
    std::copy(state.begin() + at, state.begin() + at + m.error.size(), m.error.begin());
    at += m.error.size();
    std::copy(state.begin() + at, state.begin() + at + m.q.size(), m.q.begin());
    at += m.q.size();
  }
  return absl::OkStatus();
}

}  // namespace weft::trainer
