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
//
// Pipeline parallelism: a rank holds a StagePart of the model, its model chunks, each a
// contiguous range of blocks (chunk c of stage s is virtual stage c·stages + s); the embedding
// goes with virtual stage 0 and the final norm, head and loss with the last, which then holds
// its own copy of the tied embedding (TensorView::tied_copy: its gradient is summed with the
// first stage's, as Megatron's embedding group does). ChunkForward and ChunkBackward run one
// micro-batch through one chunk, keeping its activations in one of the chunk's slots until its
// backward; the caller moves activations and their gradients between stages.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "param_layout.h"
#include "tensor_parallel.h"
#include "weft/kernels/precision.h"
#include "weft/shard/flat_buffer.h"

namespace weft::trainer {

struct ModelShape {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int seq_len = 64;
  int vocab = 256;  // bytes
};

// The part of the model one pipeline rank runs (the whole model by default).
struct StagePart {
  int stages = 1;                // pipeline ranks
  int stage = 0;                 // this one
  int chunks = 1;                // model chunks per rank (the interleaved schedule's)
  std::vector<int> slots = {1};  // per chunk: micro-batches whose activations it keeps at once
};

// Activation recomputation: kNone keeps every block's activations from forward to backward;
// kSelective (Korthikanti et al.) drops the attention core's T×T probabilities and output and
// recomputes them from the kept QKV in backward; kFull keeps only each block's output (the next
// block's input) and runs the block's forward again in backward. The same operations run again on
// the same inputs, so losses and gradients are bit-identical to kNone.
enum class Recompute { kNone, kSelective, kFull };

// What a rank keeps of its activations, and in which format.
struct ActivationOptions {
  Recompute recompute = Recompute::kNone;
  // Under kFull: only the first `recompute_layers` blocks of each chunk recompute, the others keep
  // everything (Megatron's "block" method); -1: every block.
  int recompute_layers = -1;
  // Mixed precision (kBFloat16, kFloat16): the model computes in fp32 (GEMMs accumulate in fp32),
  // but every activation and activation gradient is rounded to the 16-bit format where an op
  // writes it, the parameters it reads are the fp32 master values rounded to it (a unit at a
  // time, just before its use, as FSDP casts a gathered unit), and what blocks keep for backward
  // is stored in 16 bits. LayerNorm statistics, the softmax of the loss and the parameters'
  // gradients stay fp32.
  Precision precision = Precision::kFloat32;
};

// What a sharding driver needs to know of the passes: the model reads unit u's parameters (when
// `reads_params`) and writes its gradients only between Before(u) and After(u), so Before may
// point the unit at other storage (Gpt::SetUnitStorage). Units are the layout's: for the whole
// model 0 the embeddings (also the tied head, used at both ends of each pass), 1..n_layer the
// blocks, n_layer + 1 the final norm.
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
  // `part`: the chunks this rank runs (n_layer divisible by stages · chunks).
  Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum = 1, TensorParallel* tp = nullptr,
      StagePart part = {}, ActivationOptions activations = {});

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
  // (Under mixed precision, the model's passes read the unit's rounded working copy instead.)
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

  // The whole model on one pipeline rank: ChunkForward and ChunkBackward of chunk 0, slot 0.
  double Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T) {
    return ChunkForward(0, 0, tokens, targets, nullptr, B, T);
  }
  void Backward(float loss_scale, const std::function<void(int tensor)>& on_ready) {
    ChunkBackward(0, 0, nullptr, loss_scale, on_ready);
  }

  const StagePart& part() const { return part_; }
  // The whole model's tensors as one rank holds them (no buffers made): the names, shapes and
  // order a checkpoint's manifest lists, whatever layout saves it.
  static ParamLayout WholeLayout(const ModelShape& shape);
  // Chunk `chunk` starts with the embedding (virtual stage 0) / ends with the head and loss.
  bool has_embedding(int chunk) const { return chunks_[chunk].embedding; }
  bool has_head(int chunk) const { return chunks_[chunk].head; }
  // The tensor of the tied embedding this rank's head reads (-1 without the head).
  int head_tensor() const { return head_wte_; }
  // The tensor of the token embedding (-1 without the embedding chunk).
  int embedding_tensor() const { return wte_; }

  // Runs B ≤ max_batch sequences of T ≤ seq_len tokens (B·T a multiple of row_multiple())
  // through chunk `chunk`, keeping its activations in `slot`. The embedding chunk reads `tokens`,
  // the others `input` (this rank's rows × n_embd, copied). The head chunk, with targets, returns
  // the summed cross-entropy over the B·T positions; without, it computes the logits only.
  // Collective over the tensor-parallel group; its errors are kept there
  // (TensorParallel::TakeError).
  double ChunkForward(int chunk, int slot, const uint8_t* tokens, const uint8_t* targets,
                      const float* input, int B, int T);
  // The output of the last ChunkForward into `slot` of a chunk without the head (this rank's
  // rows × n_embd), until the chunk's next pass or ChunkOutput.
  const float* ChunkOutput(int chunk, int slot);
  // Adds d(loss_scale · summed loss)/dθ of the micro-batch in `slot` (forwarded with targets) to
  // the gradients: the head chunk from its loss, the others from `dout` (the output's gradient,
  // this rank's rows), calling on_ready(tensor) for each tensor once its gradient for this pass is
  // final. Leaves d(input) in ChunkInputGrad(chunk) for a chunk without the embedding.
  void ChunkBackward(int chunk, int slot, const float* dout, float loss_scale,
                     const std::function<void(int tensor)>& on_ready);
  // Until the chunk's next ChunkBackward.
  const float* ChunkInputGrad(int chunk) const { return chunks_[chunk].dres.data(); }

  // The whole vocabulary's logits of row `row` of the head chunk's last forward in `slot`, into
  // out[vocab] (collective over the tensor-parallel group).
  void GatherLogits(int slot, int row, float* out);
  // Bytes of the buffers that hold activations from a forward to its backward, summed over every
  // slot of every chunk (each sized for max_batch sequences): what this rank keeps at the peak.
  size_t kept_activation_bytes() const;
  // Bytes of the rounded working copies of parameters under mixed precision (0 in fp32).
  size_t working_param_bytes() const;
  Precision precision() const { return options_.precision; }

 private:
  struct BlockTensors {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  };
  struct BlockActivations {
    Recompute mode = Recompute::kNone;  // what this block recomputes in backward
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, out;
    std::vector<uint16_t> packed;  // 16-bit precision: the kept tensors, back to back
  };
  using Field = std::vector<float> BlockActivations::*;
  // The tensors a block in `mode` keeps from forward to backward (16-bit under mixed precision),
  // or (`stats`) the LayerNorm statistics it keeps (always fp32).
  static std::vector<Field> Kept(Recompute mode, bool stats);
  // Elements of `field` for B sequences of T tokens.
  size_t FieldSize(Field field, size_t B, size_t T) const;

  // A micro-batch's activations in one chunk, kept from its forward to its backward.
  struct Slot {
    std::vector<uint8_t> tokens, targets;  // copies, for the embedding's and loss's backward
    std::vector<float> input;              // the first block's input (this rank's rows)
    std::vector<BlockActivations> blocks;
    std::vector<float> lnf, lnf_mean, lnf_rstd, logits, probs;  // the head chunk's
    int B = 0, T = 0;
  };
  struct Chunk {
    int first_block = 0, end_block = 0;  // global block indices
    bool embedding = false, head = false;
    std::vector<Slot> slots;
    std::vector<float> dres;  // the backward's running gradient of the residual stream
    std::vector<float> x;     // 16-bit precision: a block's input or output, widened
  };

  // x: this rank's rows of the block input (all B·T rows without sequence parallelism).
  void BlockForward(int l, BlockActivations& a, const float* x, int B, int T);
  // The attention core of a block whose qkv is set: probabilities and output (forward, or
  // recomputed by a selective backward).
  void AttentionCore(BlockActivations& a, int B, int T);
  // dres holds d(loss)/d(block output) on entry and d(loss)/d(block input) on return (this
  // rank's rows).
  void BlockBackward(int l, BlockActivations& a, const float* x, float* dres, int B, int T,
                     const std::function<void(int tensor)>& on_ready);
  // Allocates the buffers a slot's block keeps (all of them, fp32, for the shared scratch).
  void AllocateBlock(BlockActivations& a, bool scratch);
  // The buffers a pass over block `a` of B·T rows computes in: in fp32 `a` itself, with the
  // buffers it does not keep lent by the shared scratch; in 16 bits the scratch, lent `a`'s
  // LayerNorm statistics and (`unpack`, for a backward) given `a`'s kept tensors widened.
  BlockActivations& OpenBlock(BlockActivations& a, int B, int T, bool unpack);
  // Takes back what OpenBlock lent; `pack` (after a forward, in 16 bits) stores the kept tensors.
  void CloseBlock(BlockActivations& a, int B, int T, bool pack);
  // Block `i` of slot `s`'s output (the next block's input): fp32 in place, or widened into
  // `chunk`'s x.
  const float* BlockOutput(Chunk& chunk, Slot& s, int i);
  // Rounds n activation values to the run's precision where an op wrote them.
  void Round(float* data, size_t n) { RoundTo(options_.precision, data, n); }
  bool mixed() const { return options_.precision != Precision::kFloat32; }
  // Mixed precision: unit `unit`'s parameters rounded into its working copy, which the passes read
  // until the unit's next use.
  void RoundUnit(int unit);
  // Where the passes read tensor `tensor`'s parameters.
  const float* weight(int tensor) const {
    const int unit = layout_.tensor(tensor).unit;
    return (mixed() ? unit_read_[unit] : unit_params_[unit]) + within(tensor);
  }
  // The unit of block l (global index).
  int BlockUnit(int l) const { return block_unit_[l]; }
  // A column-parallel linear's input: this rank's rows `held` of an N-row activation, gathered
  // over the group under sequence parallelism (into `scratch`), else `held` itself.
  const float* GatherRows(const float* held, float* scratch, int N, int C);
  // A column-parallel linear's input gradient: the group's partial sums of din[N,C] summed; this
  // rank's rows of the result, in din or `scratch` under sequence parallelism.
  float* SumRows(float* din, float* scratch, int N, int C);
  // A row-parallel linear: out = residual + bias + Σ_group inp[N,K] · w[C,K]ᵀ, this rank's rows.
  void RowParallelForward(float* out, const float* inp, const float* w, const float* bias,
                          const float* residual, int N, int K);
  // Vocabulary-parallel cross-entropy of the slot's logits (this rank's slice) for N rows.
  double CrossEntropy(Slot& s, const uint8_t* targets, int N);
  // This rank's rows of an N-row activation: N/t under sequence parallelism, else N.
  int HeldRows(int N) const { return N / row_multiple(); }
  // The first of them.
  int FirstRow(int N) const { return tp_->sequence_parallel() ? HeldRows(N) * tp_->rank() : 0; }

  ModelShape shape_;
  int max_batch_;
  StagePart part_;
  ActivationOptions options_;
  BlockActivations scratch_;  // the buffers blocks share for what they do not keep
  TensorParallel solo_;       // the group when none is given
  TensorParallel* tp_;
  int C_, Ca_, NHa_, H_, Vs_, v0_;  // width; attention width and heads, MLP width, vocabulary
                                    // slice and its first token, on this rank
  ParamLayout layout_;
  // Tensors and units this rank holds (-1: not here); blocks_ and block_unit_ by global block
  // index, set for the blocks of this rank's chunks; chunks_ without their buffers.
  struct Placement {
    int wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1, head_wte = -1;
    int embedding_unit = -1, lnf_unit = -1, head_unit = -1;
    std::vector<BlockTensors> blocks;
    std::vector<int> block_unit;
    std::vector<Chunk> chunks;
  };
  // Registers the tensors of `part` in a layout, as tensor-parallel rank `tp_rank` of `tp_size`
  // holds them: a pure function of its arguments, shared by the model and WholeLayout.
  static ParamLayout BuildLayout(const ModelShape& shape, size_t pad_quantum, int tp_size,
                                 int tp_rank, bool sequence_parallel, const StagePart& part,
                                 Placement* at);
  int wte_, wpe_, lnf_w_, lnf_b_, head_wte_;
  int embedding_unit_, lnf_unit_, head_unit_;
  std::vector<BlockTensors> blocks_;
  std::vector<int> block_unit_;
  std::vector<Chunk> chunks_;

  // Brackets a unit's use with the hooks, if any (and forms its working copy).
  void Before(int unit, UnitHooks::Pass pass, bool reads_params = true) {
    if (hooks_ != nullptr) hooks_->Before(unit, pass, reads_params);
    if (mixed() && reads_params) RoundUnit(unit);
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
  // Mixed precision: per unit, its working copy; the embedding unit and a separate head unit have
  // their own (used at both ends of a pass), the other units share one (used one at a time).
  std::vector<const float*> unit_read_;
  std::vector<float> work_embedding_, work_head_, work_block_;
  UnitHooks* hooks_ = nullptr;
  // Scratch shared by all chunks (each op overwrites what it writes): the backward's gradients,
  // the cross-entropy's per-row values, and under tensor parallelism full-row activations
  // (gathered or before a reduce-scatter).
  std::vector<float> dC_, dCrows_, d3C_, d4C_, datt_, rows_in_, rows_out_, ce_maxes_, ce_sums_;
};

}  // namespace weft::trainer
