// The GPT's operations, each forward next to its backward, over plain float arrays.
//
// Shapes follow llm.c: N rows (batch × time) of C features; B sequences of T tokens; NH heads.
// Weights of a linear layer are [OC, C] (out × in). Backward functions ADD into parameter
// gradients (so micro-steps accumulate) and into the input gradients named "accumulate"; the
// others overwrite, which lets one scratch buffer serve every layer without clearing it first.
// GEMMs go through OpenBLAS (cblas), plain element-wise sums through weft_kernels' reduction
// kernels; the fused loops are written so the compiler vectorizes them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::trainer::ops {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
void EncoderForward(float* out, const uint8_t* tokens, const float* wte, const float* wpe, int B,
                    int T, int C);
// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:].
void EncoderBackward(float* dwte, float* dwpe, const float* dout, const uint8_t* tokens, int B,
                     int T, int C);

// The widest row LayerNorm takes (its backward keeps a row of scratch on the stack).
inline constexpr int kMaxLayerNormWidth = 8192;

// Per row: out = (x - mean) * rstd * w + b; mean and rstd are kept for the backward.
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, int N, int C);
// Accumulates into dinp, dw and db.
void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, int N, int C);

// out[N,OC] = residual + inp[N,C] · w[OC,C]ᵀ + bias (residual and bias may be null). Folding the
// residual add into the GEMM's accumulator saves a pass over the activations.
void MatmulForward(float* out, const float* inp, const float* w, const float* bias,
                   const float* residual, int N, int C, int OC);
// dinp = dout · w (overwritten); dw += doutᵀ · inp; dbias += column sums of dout (if non-null).
void MatmulBackward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                    const float* w, int N, int C, int OC);

// Causal multi-head self-attention. qkv[B,T,3C] holds q, k, v side by side; att[B,NH,T,T] keeps
// the softmax probabilities (upper triangle zero) for the backward; out[B,T,C].
void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv is overwritten; datt is scratch of T×T floats.
void AttentionBackward(float* dqkv, float* datt, const float* dout, const float* qkv,
                       const float* att, int B, int T, int C, int NH);

// GELU, tanh approximation (GPT-2's).
void GeluForward(float* out, const float* inp, int n);
// dinp = gelu'(inp) · dout (overwritten; dinp may alias dout).
void GeluBackward(float* dinp, const float* inp, const float* dout, int n);

// out = a + b.
void ResidualForward(float* out, const float* a, const float* b, int n);

// Softmax of logits[N,V] into probs and the summed cross-entropy of the targets; returns the sum
// of -log p(target) over the N rows.
double SoftmaxCrossEntropyForward(float* probs, const float* logits, const uint8_t* targets, int N,
                                  int V);
// dlogits = (probs - onehot(target)) · scale, overwritten (scale = dloss per row).
void SoftmaxCrossEntropyBackward(float* dlogits, const float* probs, const uint8_t* targets,
                                 float scale, int N, int V);

}  // namespace weft::trainer::ops
