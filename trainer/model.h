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
//
// Tensor parallelism (Megatron-style, over a TensorParallel group of t ranks): attention's QKV is
// column-parallel with whole heads per rank (rows packed [q_r | k_r | v_r]), its output
// projection row-parallel; the MLP's first linear column-parallel, its second row-parallel; one
// sum over the group after each row-parallel linear in forward, one after each column-parallel
// linear's input gradient in backward, bias and residual added once after the sum. The embedding
// and the tied head are vocabulary-parallel (V/t rows per rank): a masked lookup summed over the
// group, and a cross-entropy that combines per-slice maxima, sums of exponentials and target
// logits, never holding a full row of logits. LayerNorms, wpe and the row-parallel biases are
// replicated. With sequence parallelism, the regions between the linears (LayerNorm, residual)
// hold this rank's share of the B·T token rows only: the sums become reduce-scatters of rows, the
// column-parallel inputs all-gathers of rows (gathered again in backward rather than kept), and the
// replicated tensors' gradients partial sums (TensorView::partial_gradient).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "param_layout.h"
#include "tensor_parallel.h"
#include "weft/shard/flat_buffer.h"

namespace weft::trainer {

struct ModelShape {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int seq_len = 64;
  int vocab = 256;  // bytes
};

// What a sharding driver needs to know of the passes: the model reads unit u's parameters (when
// `reads_params`) and writes its gradients only between Before(u) and After(u), so Before may
// point the unit at other storage (Gpt::SetUnitStorage). Units are the layout's: 0 the
// embeddings (also the tied head, used at both ends of each pass), 1..n_layer the blocks,
// n_layer + 1 the final norm.
class UnitHooks {
 public:
  enum class Pass { kForward, kBackward };
  virtual ~UnitHooks() = default;
  virtual void Before(int unit, Pass pass, bool reads_params) = 0;
  virtual void After(int unit, Pass pass) = 0;
};

class Gpt {
 public:
  // Allocates this rank's parameters, gradients and activations for up to `max_batch` sequences.
  // Each unit of the layout (embeddings, each block, final norm) is padded to a multiple of
  // `pad_quantum` elements (ParamLayout), which stay zero. `tp` (null: one rank) must outlive the
  // model; its size divides n_head, n_embd and the vocabulary, and under sequence parallelism
  // max_batch · seq_len.
  Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum = 1, TensorParallel* tp = nullptr);

  const ModelShape& shape() const { return shape_; }
  TensorParallel& tensor_parallel() { return *tp_; }
  // Forward passes take B·T token rows in multiples of this (the group's size under sequence
  // parallelism, else 1).
  int row_multiple() const { return tp_->sequence_parallel() ? tp_->size() : 1; }
  const ParamLayout& layout() const { return layout_; }
  // Elements of the flat buffers, padding included (layout().parameters() counts the model's).
  size_t num_params() const { return layout_.total(); }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  // Tensor `tensor`'s parameters and gradient where its unit's storage is now.
  float* param(int tensor) { return unit_params_[layout_.tensor(tensor).unit] + within(tensor); }
  float* grad(int tensor) { return unit_grads_[layout_.tensor(tensor).unit] + within(tensor); }
  // The flat buffers themselves, for a driver that manages what of them is resident.
  shard::FlatBuffer& param_buffer() { return params_; }
  shard::FlatBuffer& grad_buffer() { return grads_; }
  // Called around every unit's use from now on (nullptr: none). Must outlive the model's passes.
  void set_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Where unit `unit`'s parameters and gradients are read and written (each the unit's length):
  // a sharding driver's buffers instead of the flat ones, until ResetUnitStorage.
  void SetUnitStorage(int unit, float* params, float* grads);
  // Back to the flat buffers for every unit.
  void ResetUnitStorage();

  // GPT-2's initialization: N(0, 0.02) matrices, residual projections scaled by 1/sqrt(2L),
  // zero biases, unit norms. Each element is a pure function of (seed, tensor name, element
  // index in the full tensor), so any sharded or sliced layout can initialise its part alone.
  void InitParams(uint64_t seed);
  void ZeroGrads();

  // Runs B ≤ max_batch sequences of T ≤ seq_len tokens (B·T a multiple of row_multiple()). With
  // targets, returns the summed cross-entropy over the B·T positions (and keeps what Backward
  // needs); without, only the logits are computed. Collective over the tensor-parallel group;
  // its errors are kept there (TensorParallel::TakeError).
  double Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T);
  // The whole vocabulary's logits of row `row` of the last Forward, into out[vocab] (collective
  // over the tensor-parallel group).
  void GatherLogits(int row, float* out);
  // Bytes of the activations the last Forward with targets keeps for Backward on this rank.
  size_t activation_bytes() const { return ActivationBytes(B_, T_); }

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

  // x: this rank's rows of the block input (all B·T rows without sequence parallelism).
  void BlockForward(int l, const float* x, int B, int T);
  // dres holds d(loss)/d(block output) on entry and d(loss)/d(block input) on return (this
  // rank's rows).
  void BlockBackward(int l, const float* x, float* dres, int B, int T,
                     const std::function<void(int tensor)>& on_ready);
  // A column-parallel linear's input: this rank's rows `held` of an N-row activation, gathered
  // over the group under sequence parallelism (into `scratch`), else `held` itself.
  const float* GatherRows(const float* held, float* scratch, int N, int C);
  // A column-parallel linear's input gradient: the group's partial sums of din[N,C] summed; this
  // rank's rows of the result, in din or `scratch` under sequence parallelism.
  float* SumRows(float* din, float* scratch, int N, int C);
  // A row-parallel linear: out = residual + bias + Σ_group inp[N,K] · w[C,K]ᵀ, this rank's rows.
  void RowParallelForward(float* out, const float* inp, const float* w, const float* bias,
                          const float* residual, int N, int K);
  // Vocabulary-parallel cross-entropy of logits_ (this rank's slice) for N rows.
  double CrossEntropy(const uint8_t* targets, int N);
  // Activation bytes kept for backward by a pass of B sequences of T tokens.
  size_t ActivationBytes(int B, int T) const;
  // This rank's rows of an N-row activation: N/t under sequence parallelism, else N.
  int HeldRows(int N) const { return N / row_multiple(); }
  // The first of them.
  int FirstRow(int N) const { return tp_->sequence_parallel() ? HeldRows(N) * tp_->rank() : 0; }

  ModelShape shape_;
  int max_batch_;
  TensorParallel solo_;  // the group when none is given
  TensorParallel* tp_;
  int C_, Ca_, NHa_, H_, Vs_, v0_;  // width; attention width and heads, MLP width, vocabulary
                                    // slice and its first token, on this rank
  ParamLayout layout_;
  int wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<BlockTensors> blocks_;

  // Brackets a unit's use with the hooks, if any.
  void Before(int unit, UnitHooks::Pass pass, bool reads_params = true) {
    if (hooks_ != nullptr) hooks_->Before(unit, pass, reads_params);
  }
  void After(int unit, UnitHooks::Pass pass) {
    if (hooks_ != nullptr) hooks_->After(unit, pass);
  }

  size_t within(int tensor) const {
    const TensorView& t = layout_.tensor(tensor);
    return t.offset - layout_.units()[t.unit].offset;
  }

  shard::FlatBuffer params_, grads_;
  std::vector<float*> unit_params_, unit_grads_;  // per unit: where its storage is now
  UnitHooks* hooks_ = nullptr;
  // Activations of the last Forward.
  const uint8_t* tokens_ = nullptr;
  const uint8_t* targets_ = nullptr;
  int B_ = 0, T_ = 0;
  std::vector<float> encoded_;
  std::vector<BlockActivations> acts_;
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, probs_;
  std::vector<float> ce_maxes_, ce_sums_;  // per row; sums then target logits
  // Scratch shared by all blocks (each op overwrites what it writes): the backward's gradients,
  // and under tensor parallelism full-row activations (gathered or before a reduce-scatter).
  std::vector<float> dres_, dC_, dCrows_, d3C_, d4C_, datt_, rows_in_, rows_out_;
};

}  // namespace weft::trainer
