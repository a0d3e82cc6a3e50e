// Gpt: a GPT-2 style decoder over byte tokens, forward and backward, in fp32.
//
//   tokens → wte[token] + wpe[t] → Block × n_layer → LayerNorm → · wteᵀ (tied head)
//          → softmax cross-entropy
//   Block: x + Attn(LN1(x)) → r; r + MLP(LN2(r)) with MLP = fc → GELU → proj.
//
// The model reads top to bottom in model.cc: each step of Forward has its mirror in Backward.
// Parameters and gradients are flat buffers described by a ParamLayout registered in forward
// order (wte, wpe, blocks 0..L-1, final norm); backward finishes gradients in reverse order and
// reports each tensor the moment its gradient is final, so a data-parallel reducer can start
// sending while the rest of backward runs. Blocks are self-contained (their tensors and
// activations), so a pipeline stage is a range of blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "param_layout.h"

namespace weft::trainer {

struct ModelShape {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int seq_len = 64;
  int vocab = 256;  // bytes
};

class Gpt {
 public:
  // Allocates parameters, gradients and activations for up to `max_batch` sequences. Each unit
  // of the layout (embeddings, each block, final norm) is padded to a multiple of `pad_quantum`
  // elements (ParamLayout), which stay zero.
  Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum = 1);

  const ModelShape& shape() const { return shape_; }
  const ParamLayout& layout() const { return layout_; }
  // Elements of the flat buffers, padding included (layout().parameters() counts the model's).
  size_t num_params() const { return layout_.total(); }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  float* param(int tensor) { return params_.data() + layout_.tensor(tensor).offset; }
  float* grad(int tensor) { return grads_.data() + layout_.tensor(tensor).offset; }

  // GPT-2's initialization: N(0, 0.02) matrices, residual projections scaled by 1/sqrt(2L),
  // zero biases, unit norms. Each element is a pure function of (seed, tensor name, element
  // index in the full tensor), so any sharded or sliced layout can initialise its part alone.
  void InitParams(uint64_t seed);
  void ZeroGrads();

  // Runs B ≤ max_batch sequences of T ≤ seq_len tokens. With targets, returns the summed
  // cross-entropy over the B·T positions (and keeps what Backward needs); without, only the
  // logits are computed.
  double Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T);
  // [B·T, vocab] logits of the last Forward.
  const float* logits() const { return logits_.data(); }

  // Adds d(loss_scale · summed loss)/dθ of the last Forward (with targets) to the gradients,
  // calling on_ready(tensor) for each tensor once its gradient for this pass is final.
  void Backward(float loss_scale, const std::function<void(int tensor)>& on_ready);

 private:
  struct BlockTensors {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  };
  struct BlockActivations {
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, out;
  };

  void BlockForward(int l, const float* x, int B, int T);
  // dres holds d(loss)/d(block output) on entry and d(loss)/d(block input) on return.
  void BlockBackward(int l, const float* x, float* dres, int B, int T,
                     const std::function<void(int tensor)>& on_ready);

  ModelShape shape_;
  int max_batch_;
  ParamLayout layout_;
  int wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<BlockTensors> blocks_;

  std::vector<float> params_, grads_;
  // Activations of the last Forward.
  const uint8_t* tokens_ = nullptr;
  const uint8_t* targets_ = nullptr;
  int B_ = 0, T_ = 0;
  std::vector<float> encoded_;
  std::vector<BlockActivations> acts_;
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, probs_;
  // Backward scratch shared by all blocks (each op overwrites what it writes).
  std::vector<float> dres_, dC_, d3C_, d4C_, datt_;
};

}  // namespace weft::trainer
