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

// The token embedding of a slice of the vocabulary, tokens [first, first + V) (all of it when
// first = 0 and V is the vocabulary): out[n,:] = wte[tokens[n] − first,:] for tokens in the slice,
// 0 for the others, so that the slices' outputs sum to the full lookup.
void EmbeddingForward(float* out, const uint8_t* tokens, const float* wte, int first, int V, int N,
                      int C);
// dwte[tokens[n] − first,:] += dout[n,:] for tokens in the slice.
void EmbeddingBackward(float* dwte, const float* dout, const uint8_t* tokens, int first, int V,
                       int N, int C);
// Rows row0 .. row0 + N − 1 of B·T token rows: out[n,:] += wpe[(row0 + n) mod T,:].
void PositionForward(float* out, const float* wpe, int row0, int N, int T, int C);
// dwpe[(row0 + n) mod T,:] += dout[n,:].
void PositionBackward(float* dwpe, const float* dout, int row0, int N, int T, int C);

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

// Softmax cross-entropy over a slice [first, first + V) of the vocabulary (all of it when first = 0
// and V is the vocabulary), in three passes, so that a vocabulary-parallel group can combine its
// slices between them without ever holding a full row of logits:
//   1. maxes[n] = the largest of row n's logits (then the largest over the group);
//   2. probs = exp(logits − maxes); sums[n] = Σ probs of row n, and target_logits[n] = the
//      target's logit if it is in the slice, else 0 (then each summed over the group);
//   3. probs /= sums; returns Σ_n log(sums[n]) + maxes[n] − target_logits[n].
void CrossEntropyMax(float* maxes, const float* logits, int N, int V);
void CrossEntropyExp(float* probs, float* sums, float* target_logits, const float* logits,
                     const float* maxes, const uint8_t* targets, int first, int N, int V);
double CrossEntropyNormalize(float* probs, const float* sums, const float* maxes,
                             const float* target_logits, int N, int V);
// The three passes for a whole vocabulary: softmax of logits[N,V] into probs; returns the sum of
// -log p(target) over the N rows.
double SoftmaxCrossEntropyForward(float* probs, const float* logits, const uint8_t* targets, int N,
                                  int V);
// dlogits = (probs − onehot(target − first)) · scale over the slice, overwritten (scale = dloss
// per row).
void SoftmaxCrossEntropyBackward(float* dlogits, const float* probs, const uint8_t* targets,
                                 int first, float scale, int N, int V);

// out[n,:] = (residual[n,:] + bias) + out[n,:], the order MatmulForward folds them in (bias or
// residual may be null).
void AddBiasResidual(float* out, const float* bias, const float* residual, int N, int C);

}  // namespace weft::trainer::ops
