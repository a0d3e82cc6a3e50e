#include "ops.h"

#include <cblas.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "vector_clones.h"
#include "weft/kernels/reduce.h"

namespace weft::trainer::ops {
namespace {

// exp(x) in straight-line arithmetic (range reduction by ln 2, degree-6 polynomial, exponent
// bits), so that loops over it vectorize; relative error below 2e-7 over the float range used
// here. libm's expf is a call the compiler cannot vectorize, and GELU and softmax make ~10^6 of
// them per step.
inline float FastExp(float x) {
  // Ternaries rather than std::clamp: they if-convert to min/max, keeping loops vectorizable.
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  // Round to nearest by adding and removing 1.5·2^23 (vectorizes, unlike nearbyint).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // ln 2 split in a high part exact in float and a low correction.
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// Sum of n floats in 16 interleaved partial sums: the compiler keeps them in one vector register
// (a single running sum is a serial dependency it may not reorder). Fixed order, so deterministic.
inline float Sum(const float* x, int n) {
  float lanes[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 16; ++k) lanes[k] += x[i + k];
  }
  for (; i < n; ++i) lanes[i & 15] += x[i];
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// Σ a[i]·b[i] the same way.
inline float DotProduct(const float* a, const float* b, int n) {
  float lanes[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 16; ++k) lanes[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) lanes[i & 15] += a[i] * b[i];
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

inline float FastTanh(float x) {
  // tanh(x) = 1 - 2 / (exp(2x) + 1), saturating cleanly at both ends.
  return 1.0f - 2.0f / (FastExp(2.0f * x) + 1.0f);
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

}  // namespace

void EmbeddingForward(float* out, const uint8_t* tokens, const float* wte, int first, int V, int N,
                      int C) {
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<size_t>(n) * C;
    const int row = tokens[n] - first;
    if (row >= 0 && row < V) {
      std::memcpy(o, wte + static_cast<size_t>(row) * C, sizeof(float) * C);
    } else {
      std::memset(o, 0, sizeof(float) * C);
    }
  }
}

void EmbeddingBackward(float* dwte, const float* dout, const uint8_t* tokens, int first, int V,
                       int N, int C) {
  for (int n = 0; n < N; ++n) {
    const int row = tokens[n] - first;
    if (row < 0 || row >= V) continue;
    ReduceInto(DataType::kFloat32, ReduceOp::kSum, dwte + static_cast<size_t>(row) * C,
               dout + static_cast<size_t>(n) * C, C);
  }
}

void PositionForward(float* out, const float* wpe, int row0, int N, int T, int C) {
  for (int n = 0; n < N; ++n) {
    ReduceInto(DataType::kFloat32, ReduceOp::kSum, out + static_cast<size_t>(n) * C,
               wpe + static_cast<size_t>((row0 + n) % T) * C, C);
  }
}

void PositionBackward(float* dwpe, const float* dout, int row0, int N, int T, int C) {
  for (int n = 0; n < N; ++n) {
    ReduceInto(DataType::kFloat32, ReduceOp::kSum, dwpe + static_cast<size_t>((row0 + n) % T) * C,
               dout + static_cast<size_t>(n) * C, C);
  }
}

WEFT_VECTOR_CLONES
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* o = out + static_cast<size_t>(n) * C;
    const float m = Sum(x, C) / C;
    // The centred row goes through `o` so the variance is one more vector reduction.
    for (int i = 0; i < C; ++i) o[i] = x[i] - m;
    const float var = DotProduct(o, o, C) / C;
    const float s = 1.0f / std::sqrt(var + 1e-5f);
    for (int i = 0; i < C; ++i) o[i] = o[i] * s * w[i] + b[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

WEFT_VECTOR_CLONES
void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* d = dout + static_cast<size_t>(n) * C;
    const float* x = inp + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    const float m = mean[n];
    const float s = rstd[n];
    // Two reductions of the normalized-space gradient, then the closed form of the backward.
    float norm[kMaxLayerNormWidth];
    float dnorm[kMaxLayerNormWidth];
    for (int i = 0; i < C; ++i) {
      norm[i] = (x[i] - m) * s;
      dnorm[i] = w[i] * d[i];
    }
    const float dnorm_mean = Sum(dnorm, C) / C;
    const float dnorm_norm_mean = DotProduct(dnorm, norm, C) / C;
    for (int i = 0; i < C; ++i) {
      db[i] += d[i];
      dw[i] += norm[i] * d[i];
      dx[i] += (dnorm[i] - dnorm_mean - norm[i] * dnorm_norm_mean) * s;
    }
  }
}

void MatmulForward(float* out, const float* inp, const float* w, const float* bias,
                   const float* residual, int N, int C, int OC) {
  float beta = 1.0f;
  if (residual != nullptr && bias != nullptr) {
    for (int n = 0; n < N; ++n) {
      const size_t row = static_cast<size_t>(n) * OC;
      for (int o = 0; o < OC; ++o) out[row + o] = residual[row + o] + bias[o];
    }
  } else if (residual != nullptr) {
    std::memcpy(out, residual, sizeof(float) * N * OC);
  } else if (bias != nullptr) {
    for (int n = 0; n < N; ++n) {
      std::memcpy(out + static_cast<size_t>(n) * OC, bias, sizeof(float) * OC);
    }
  } else {
    beta = 0.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

void MatmulBackward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                    const float* w, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp,
              C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw,
              C);
  if (dbias != nullptr) {
    for (int n = 0; n < N; ++n) {
      ReduceInto(DataType::kFloat32, ReduceOp::kSum, dbias, dout + static_cast<size_t>(n) * OC, OC);
    }
  }
}

WEFT_VECTOR_CLONES
void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + (static_cast<size_t>(b) * NH + h) * T * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, a,
                  T);
      for (int t = 0; t < T; ++t) {
        float* row = a + static_cast<size_t>(t) * T;
        float maxv = row[0];
        for (int j = 1; j <= t; ++j) maxv = row[j] > maxv ? row[j] : maxv;
        for (int j = 0; j <= t; ++j) row[j] = FastExp(row[j] - maxv);
        const float inv = 1.0f / Sum(row, t + 1);
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f,
                  out + static_cast<size_t>(b) * T * C + h * hs, C);
    }
  }
}

WEFT_VECTOR_CLONES
void AttentionBackward(float* dqkv, float* datt, const float* dout, const float* qkv,
                       const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t base = static_cast<size_t>(b) * T * C3 + h * hs;
      const float* q = qkv + base;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + base;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* a = att + (static_cast<size_t>(b) * NH + h) * T * T;
      const float* d = dout + static_cast<size_t>(b) * T * C + h * hs;
      // datt = dout · vᵀ and dv = attᵀ · dout.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, v, C3, 0.0f, datt,
                  T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, d, C, 0.0f, dv,
                  C3);
      // Softmax backward in place: dpre = att · (datt - Σ att · datt), times the score scale.
      // Masked entries have att = 0, so their gradient is 0 as well.
      for (int t = 0; t < T; ++t) {
        const float* arow = a + static_cast<size_t>(t) * T;
        float* drow = datt + static_cast<size_t>(t) * T;
        const float dot = DotProduct(arow, drow, t + 1);
        for (int j = 0; j <= t; ++j) drow[j] = arow[j] * (drow[j] - dot) * scale;
        for (int j = t + 1; j < T; ++j) drow[j] = 0.0f;
      }
      // dq = dpre · k and dk = dpreᵀ · q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, datt, T, k, C3, 0.0f,
                  dq, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, datt, T, q, C3, 0.0f, dk,
                  C3);
    }
  }
}

WEFT_VECTOR_CLONES
void GeluForward(float* out, const float* inp, int n) {
  for (int i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    out[i] = 0.5f * x * (1.0f + FastTanh(u));
  }
}

WEFT_VECTOR_CLONES
void GeluBackward(float* dinp, const float* inp, const float* dout, int n) {
  for (int i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    const float th = FastTanh(u);
    const float sech2 = 1.0f - th * th;
    const float local =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
  }
}

void ResidualForward(float* out, const float* a, const float* b, int n) {
  Reduce(DataType::kFloat32, ReduceOp::kSum, out, a, b, n);
}

WEFT_VECTOR_CLONES
void CrossEntropyMax(float* maxes, const float* logits, int N, int V) {
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * V;
    float maxv = l[0];
    for (int v = 1; v < V; ++v) maxv = l[v] > maxv ? l[v] : maxv;
    maxes[n] = maxv;
  }
}

void CrossEntropyExp(float* probs, float* sums, float* target_logits, const float* logits,
                     const float* maxes, const uint8_t* targets, int first, int N, int V) {
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * V;
    float* p = probs + static_cast<size_t>(n) * V;
    for (int v = 0; v < V; ++v) p[v] = FastExp(l[v] - maxes[n]);
    sums[n] = Sum(p, V);
    const int target = targets[n] - first;
    target_logits[n] = target >= 0 && target < V ? l[target] : 0.0f;
  }
}

double CrossEntropyNormalize(float* probs, const float* sums, const float* maxes,
                             const float* target_logits, int N, int V) {
  double loss = 0.0;
  for (int n = 0; n < N; ++n) {
    float* p = probs + static_cast<size_t>(n) * V;
    const float inv = 1.0f / sums[n];
    for (int v = 0; v < V; ++v) p[v] *= inv;
    // From the logits rather than log(p): exact for tiny probabilities.
    loss += static_cast<double>(std::log(sums[n])) + maxes[n] - target_logits[n];
  }
  return loss;
}

double SoftmaxCrossEntropyForward(float* probs, const float* logits, const uint8_t* targets, int N,
                                  int V) {
  std::vector<float> maxes(N), sums(N), target_logits(N);
  CrossEntropyMax(maxes.data(), logits, N, V);
  CrossEntropyExp(probs, sums.data(), target_logits.data(), logits, maxes.data(), targets, 0, N, V);
  return CrossEntropyNormalize(probs, sums.data(), maxes.data(), target_logits.data(), N, V);
}

void SoftmaxCrossEntropyBackward(float* dlogits, const float* probs, const uint8_t* targets,
                                 int first, float scale, int N, int V) {
  for (int n = 0; n < N; ++n) {
    const float* p = probs + static_cast<size_t>(n) * V;
    float* d = dlogits + static_cast<size_t>(n) * V;
    for (int v = 0; v < V; ++v) d[v] = p[v] * scale;
    const int target = targets[n] - first;
    if (target >= 0 && target < V) d[target] -= scale;
  }
}

void AddBiasResidual(float* out, const float* bias, const float* residual, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const size_t row = static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      float add = residual != nullptr ? residual[row + c] : 0.0f;
      if (bias != nullptr) add = residual != nullptr ? add + bias[c] : bias[c];
      out[row + c] = add + out[row + c];
    }
  }
}

}  // namespace weft::trainer::ops
