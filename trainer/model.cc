#include "model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "ops.h"
#include "rng.h"

namespace weft::trainer {

namespace {

// Part `part` of `parts` of a [rows, cols] tensor cut along its rows, each of `groups` equal row
// blocks cut separately (QKV: q, k and v each give a rank its heads).
std::vector<TensorRun> RowPart(int rows, int cols, int groups, int parts, int part) {
  const size_t block = static_cast<size_t>(rows) / groups, share = block / parts;
  std::vector<TensorRun> runs;
  for (int g = 0; g < groups; ++g) {
    runs.push_back({(g * block + part * share) * cols, g * share * cols, share * cols});
  }
  return runs;
}

// Part `part` of `parts` of a [rows, cols] tensor cut along its columns.
std::vector<TensorRun> ColumnPart(int rows, int cols, int parts, int part) {
  const size_t share = static_cast<size_t>(cols) / parts;
  std::vector<TensorRun> runs;
  for (int r = 0; r < rows; ++r) {
    runs.push_back({static_cast<size_t>(r) * cols + part * share, r * share, share});
  }
  return runs;
}

}  // namespace

ParamLayout Gpt::BuildLayout(const ModelShape& shape, size_t pad_quantum, int t, int r,
                             bool sequence_parallel, const StagePart& part, Placement* at) {
  ParamLayout layout(pad_quantum);
  const int C = shape.n_embd, V = shape.vocab;
  const int Ca = C / t, H = 4 * C / t, Vs = V / t;
  const int virtual_stages = part.stages * part.chunks;
  const int per_chunk = shape.n_layer / virtual_stages;
  at->blocks.resize(shape.n_layer);
  at->block_unit.assign(shape.n_layer, -1);
  const auto unit = [&] { return static_cast<int>(layout.units().size()); };
  const auto partial = [&](std::initializer_list<int> tensors) {
    // Under sequence parallelism computed from this rank's token rows only (the row-parallel
    // biases see the gathered rows).
    if (!sequence_parallel || t == 1) return;
    for (int x : tensors) layout.MarkPartialGradient(x);
  };
  for (int c = 0; c < part.chunks; ++c) {
    const int v = c * part.stages + part.stage;
    Chunk chunk;
    chunk.first_block = v * per_chunk;
    chunk.end_block = (v + 1) * per_chunk;
    chunk.embedding = v == 0;
    chunk.head = v == virtual_stages - 1;
    if (chunk.embedding) {
      at->embedding_unit = unit();
      at->wte = layout.AddPart("wte", {V, C}, {Vs, C}, RowPart(V, C, 1, t, r), true);
      at->wpe = layout.Add("wpe", {shape.seq_len, C}, true);
      layout.EndUnit("embeddings");
      partial({at->wpe});
    }
    for (int l = chunk.first_block; l < chunk.end_block; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      BlockTensors& b = at->blocks[l];
      at->block_unit[l] = unit();
      b.ln1_w = layout.Add(p + "ln1.w", {C}, false);
      b.ln1_b = layout.Add(p + "ln1.b", {C}, false);
      b.qkv_w = layout.AddPart(p + "attn.qkv.w", {3 * C, C}, {3 * Ca, C},
                               RowPart(3 * C, C, 3, t, r), true);
      b.qkv_b =
          layout.AddPart(p + "attn.qkv.b", {3 * C}, {3 * Ca}, RowPart(3 * C, 1, 3, t, r), false);
      b.proj_w = layout.AddPart(p + "attn.proj.w", {C, C}, {C, Ca}, ColumnPart(C, C, t, r), true);
      b.proj_b = layout.Add(p + "attn.proj.b", {C}, false);
      b.ln2_w = layout.Add(p + "ln2.w", {C}, false);
      b.ln2_b = layout.Add(p + "ln2.b", {C}, false);
      b.fc_w = layout.AddPart(p + "mlp.fc.w", {4 * C, C}, {H, C}, RowPart(4 * C, C, 1, t, r), true);
      b.fc_b = layout.AddPart(p + "mlp.fc.b", {4 * C}, {H}, RowPart(4 * C, 1, 1, t, r), false);
      b.fcproj_w =
          layout.AddPart(p + "mlp.proj.w", {C, 4 * C}, {C, H}, ColumnPart(C, 4 * C, t, r), true);
      b.fcproj_b = layout.Add(p + "mlp.proj.b", {C}, false);
      layout.EndUnit("h." + std::to_string(l));
      partial({b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b});
    }
    if (chunk.head) {
      at->lnf_unit = unit();
      at->lnf_w = layout.Add("lnf.w", {C}, false);
      at->lnf_b = layout.Add("lnf.b", {C}, false);
      layout.EndUnit("lnf");
      partial({at->lnf_w, at->lnf_b});
      if (at->wte >= 0) {
        at->head_wte = at->wte;
        at->head_unit = at->embedding_unit;
      } else {
        at->head_unit = unit();
        at->head_wte = layout.AddPart("wte", {V, C}, {Vs, C}, RowPart(V, C, 1, t, r), true);
        layout.MarkTiedCopy(at->head_wte);
        layout.EndUnit("head");
      }
    }
    at->chunks.push_back(std::move(chunk));
  }
  return layout;
}

ParamLayout Gpt::WholeLayout(const ModelShape& shape) {
  Placement at;
  return BuildLayout(shape, 1, 1, 0, false, StagePart{}, &at);
}

Gpt::Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum, TensorParallel* tp,
         StagePart part, ActivationOptions activations)
    : shape_(shape),
      max_batch_(max_batch),
      part_(std::move(part)),
      options_(activations),
      tp_(tp != nullptr ? tp : &solo_) {
  const int t = tp_->size(), r = tp_->rank();
  const int C = shape.n_embd;
  C_ = C;
  Ca_ = C / t;
  NHa_ = shape.n_head / t;
  H_ = 4 * C / t;
  Vs_ = shape.vocab / t;
  v0_ = r * Vs_;
  Placement at;
  layout_ = BuildLayout(shape, pad_quantum, t, r, tp_->sequence_parallel(), part_, &at);
  wte_ = at.wte;
  wpe_ = at.wpe;
  lnf_w_ = at.lnf_w;
  lnf_b_ = at.lnf_b;
  head_wte_ = at.head_wte;
  embedding_unit_ = at.embedding_unit;
  lnf_unit_ = at.lnf_unit;
  head_unit_ = at.head_unit;
  blocks_ = std::move(at.blocks);
  block_unit_ = std::move(at.block_unit);
  chunks_ = std::move(at.chunks);
  params_ = shard::FlatBuffer(layout_.total());
  grads_ = shard::FlatBuffer(layout_.total());
  ResetUnitStorage();
  if (mixed()) {
    for (size_t u = 0; u < layout_.units().size(); ++u) {
      const int unit = static_cast<int>(u);
      std::vector<float>& work = unit == embedding_unit_ ? work_embedding_
                                 : unit == head_unit_    ? work_head_
                                                         : work_block_;
      work.resize(std::max(work.size(), layout_.units()[u].size));
    }
  }

  const size_t BT = static_cast<size_t>(max_batch) * shape.seq_len;
  const size_t held = BT / row_multiple();
  bool needs_scratch = false;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    Chunk& chunk = chunks_[c];
    chunk.slots.resize(c < part_.slots.size() ? part_.slots[c] : 1);
    for (Slot& slot : chunk.slots) {
      slot.tokens.resize(BT);
      slot.targets.resize(BT);
      slot.input.resize(held * C);
      slot.blocks.resize(chunk.end_block - chunk.first_block);
      for (size_t i = 0; i < slot.blocks.size(); ++i) {
        BlockActivations& a = slot.blocks[i];
        a.mode = options_.recompute;
        const int k = options_.recompute_layers;
        if (a.mode == Recompute::kFull && k >= 0 && static_cast<int>(i) >= k) {
          a.mode = Recompute::kNone;
        }
        AllocateBlock(a, false);
        needs_scratch |= a.mode != Recompute::kNone || mixed();
      }
      if (chunk.head) {
        slot.lnf.resize(held * C);
        slot.lnf_mean.resize(held);
        slot.lnf_rstd.resize(held);
        slot.logits.resize(BT * Vs_);
        slot.probs.resize(BT * Vs_);
      }
    }
    chunk.dres.resize(held * C);
    if (mixed()) chunk.x.resize(held * C);
  }
  if (needs_scratch) AllocateBlock(scratch_, true);
  ce_maxes_.resize(BT);
  ce_sums_.resize(2 * BT);
  dC_.resize(BT * C);
  d3C_.resize(BT * 3 * Ca_);
  d4C_.resize(BT * H_);
  datt_.resize(static_cast<size_t>(shape.seq_len) * shape.seq_len);
  if (t > 1) {
    dCrows_.resize(held * C);
    rows_in_.resize(BT * C);
    rows_out_.resize(BT * C);
  }
}

void Gpt::InitParams(uint64_t seed) {
  const float residual_std = 0.02f / std::sqrt(2.0f * shape_.n_layer);
  for (const TensorView& t : layout_.tensors()) {
    float* p = params_.data() + t.offset;
    const bool norm_weight =
        t.name.ends_with("ln1.w") || t.name.ends_with("ln2.w") || t.name == "lnf.w";
    if (norm_weight) {
      std::fill(p, p + t.size, 1.0f);
    } else if (t.shape.size() == 1) {
      std::fill(p, p + t.size, 0.0f);
    } else {
      const bool residual = t.name.ends_with("attn.proj.w") || t.name.ends_with("mlp.proj.w");
      const float std = residual ? residual_std : 0.02f;
      // Indexed by the element's place in the whole tensor: any part initialises as one rank.
      for (const TensorRun& run : t.runs) {
        for (size_t i = 0; i < run.count; ++i) {
          p[run.local + i] = std * IndexedNormal(seed, t.name, run.global + i);
        }
      }
    }
  }
}

void Gpt::SetUnitStorage(int unit, float* params, float* grads) {
  unit_params_[unit] = params;
  unit_grads_[unit] = grads;
}

void Gpt::ResetUnitStorage() {
  unit_params_.clear();
  unit_grads_.clear();
  unit_read_.assign(layout_.units().size(), nullptr);
  for (const UnitView& u : layout_.units()) {
    unit_params_.push_back(params_.data() + u.offset);
    unit_grads_.push_back(grads_.data() + u.offset);
  }
}

void Gpt::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

const float* Gpt::GatherRows(const float* held, float* scratch, int N, int C) {
  if (!tp_->sequence_parallel()) return held;
  tp_->GatherFromSequence(held, scratch, N, C);
  return scratch;
}

float* Gpt::SumRows(float* din, float* scratch, int N, int C) {
  if (tp_->sequence_parallel()) {
    tp_->ReduceScatterToSequence(din, scratch, N, C);
    return scratch;
  }
  tp_->ReduceFromRegion(din, static_cast<size_t>(N) * C);
  return din;
}

void Gpt::RowParallelForward(float* out, const float* inp, const float* w, const float* bias,
                             const float* residual, int N, int K) {
  const int C = C_;
  if (tp_->size() == 1) {
    ops::MatmulForward(out, inp, w, bias, residual, N, K, C);
    return;
  }
  if (tp_->sequence_parallel()) {
    ops::MatmulForward(rows_out_.data(), inp, w, nullptr, nullptr, N, K, C);
    tp_->ReduceScatterToSequence(rows_out_.data(), out, N, C);  // g, as a reduce-scatter
  } else {
    ops::MatmulForward(out, inp, w, nullptr, nullptr, N, K, C);
    tp_->ReduceFromRegion(out, static_cast<size_t>(N) * C);  // g
  }
  ops::AddBiasResidual(out, bias, residual, HeldRows(N), C);
}

void Gpt::BlockForward(int l, BlockActivations& a, const float* x, int B, int T) {
  const BlockTensors& w = blocks_[l];
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  // Attention: res2 = x + proj(attn(qkv(ln1(x)))); QKV column-parallel (this rank's heads),
  // proj row-parallel.
  ops::LayerNormForward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, weight(w.ln1_w),
                        weight(w.ln1_b), held, C);
  Round(a.ln1.data(), static_cast<size_t>(held) * C);
  const float* ln1 = GatherRows(a.ln1.data(), rows_in_.data(), N, C);
  ops::MatmulForward(a.qkv.data(), ln1, weight(w.qkv_w), weight(w.qkv_b), nullptr, N, C, 3 * Ca_);
  Round(a.qkv.data(), static_cast<size_t>(N) * 3 * Ca_);
  AttentionCore(a, B, T);
  RowParallelForward(a.res2.data(), a.atty.data(), weight(w.proj_w), weight(w.proj_b), x, N, Ca_);
  Round(a.res2.data(), static_cast<size_t>(held) * C);
  // MLP: out = res2 + proj(gelu(fc(ln2(res2)))); fc column-parallel, proj row-parallel.
  ops::LayerNormForward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                        weight(w.ln2_w), weight(w.ln2_b), held, C);
  Round(a.ln2.data(), static_cast<size_t>(held) * C);
  const float* ln2 = GatherRows(a.ln2.data(), rows_in_.data(), N, C);
  ops::MatmulForward(a.fch.data(), ln2, weight(w.fc_w), weight(w.fc_b), nullptr, N, C, H_);
  Round(a.fch.data(), static_cast<size_t>(N) * H_);
  ops::GeluForward(a.fch_gelu.data(), a.fch.data(), N * H_);
  Round(a.fch_gelu.data(), static_cast<size_t>(N) * H_);
  RowParallelForward(a.out.data(), a.fch_gelu.data(), weight(w.fcproj_w), weight(w.fcproj_b),
                     a.res2.data(), N, H_);
  Round(a.out.data(), static_cast<size_t>(held) * C);
}

void Gpt::AttentionCore(BlockActivations& a, int B, int T) {
  ops::AttentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, Ca_, NHa_);
  Round(a.att.data(), static_cast<size_t>(B) * NHa_ * T * T);
  Round(a.atty.data(), static_cast<size_t>(B) * T * Ca_);
}

void Gpt::BlockBackward(int l, BlockActivations& a, const float* x, float* dres, int B, int T,
                        const std::function<void(int tensor)>& on_ready) {
  const BlockTensors& w = blocks_[l];
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  // MLP: out = res2 + proj(gelu(fc(ln2(res2)))); dres flows to res2 unchanged plus the branch.
  const float* dout = GatherRows(dres, rows_out_.data(), N, C);
  ops::MatmulBackward(d4C_.data(), grad(w.fcproj_w), grad(w.fcproj_b), dout, a.fch_gelu.data(),
                      weight(w.fcproj_w), N, H_, C);
  Round(d4C_.data(), static_cast<size_t>(N) * H_);
  ops::GeluBackward(d4C_.data(), a.fch.data(), d4C_.data(), N * H_);
  Round(d4C_.data(), static_cast<size_t>(N) * H_);
  const float* ln2 = GatherRows(a.ln2.data(), rows_in_.data(), N, C);  // again: not kept
  ops::MatmulBackward(dC_.data(), grad(w.fc_w), grad(w.fc_b), d4C_.data(), ln2, weight(w.fc_w), N,
                      C, H_);
  float* dln2 = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
  Round(dln2, static_cast<size_t>(held) * C);
  ops::LayerNormBackward(dres, grad(w.ln2_w), grad(w.ln2_b), dln2, a.res2.data(), weight(w.ln2_w),
                         a.ln2_mean.data(), a.ln2_rstd.data(), held, C);
  Round(dres, static_cast<size_t>(held) * C);
  // Attention: res2 = x + proj(attn(qkv(ln1(x)))).
  dout = GatherRows(dres, rows_out_.data(), N, C);
  ops::MatmulBackward(dC_.data(), grad(w.proj_w), grad(w.proj_b), dout, a.atty.data(),
                      weight(w.proj_w), N, Ca_, C);
  Round(dC_.data(), static_cast<size_t>(N) * Ca_);
  ops::AttentionBackward(d3C_.data(), datt_.data(), dC_.data(), a.qkv.data(), a.att.data(), B, T,
                         Ca_, NHa_);
  Round(d3C_.data(), static_cast<size_t>(N) * 3 * Ca_);
  const float* ln1 = GatherRows(a.ln1.data(), rows_in_.data(), N, C);
  ops::MatmulBackward(dC_.data(), grad(w.qkv_w), grad(w.qkv_b), d3C_.data(), ln1, weight(w.qkv_w),
                      N, C, 3 * Ca_);
  float* dln1 = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
  Round(dln1, static_cast<size_t>(held) * C);
  ops::LayerNormBackward(dres, grad(w.ln1_w), grad(w.ln1_b), dln1, x, weight(w.ln1_w),
                         a.ln1_mean.data(), a.ln1_rstd.data(), held, C);
  Round(dres, static_cast<size_t>(held) * C);
  for (int t : {w.fcproj_b, w.fcproj_w, w.fc_b, w.fc_w, w.ln2_b, w.ln2_w, w.proj_b, w.proj_w,
                w.qkv_b, w.qkv_w, w.ln1_b, w.ln1_w}) {
    on_ready(t);
  }
}

double Gpt::CrossEntropy(Slot& s, const uint8_t* targets, int N) {
  if (tp_->size() == 1) {
    return ops::SoftmaxCrossEntropyForward(s.probs.data(), s.logits.data(), targets, N, Vs_);
  }
  float* maxes = ce_maxes_.data();
  float* sums = ce_sums_.data();  // N sums of exponentials, then N target logits
  ops::CrossEntropyMax(maxes, s.logits.data(), N, Vs_);
  tp_->MaxFromRegion(maxes, N);
  ops::CrossEntropyExp(s.probs.data(), sums, sums + N, s.logits.data(), maxes, targets, v0_, N,
                       Vs_);
  tp_->ReduceFromRegion(sums, 2 * static_cast<size_t>(N));
  return ops::CrossEntropyNormalize(s.probs.data(), sums, maxes, sums + N, N, Vs_);
}

double Gpt::ChunkForward(int chunk, int slot, const uint8_t* tokens, const uint8_t* targets,
                         const float* input, int B, int T) {
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  Chunk& ch = chunks_[chunk];
  Slot& s = ch.slots[slot];
  s.B = B;
  s.T = T;
  using Pass = UnitHooks::Pass;
  if (ch.embedding) {
    // Embedding: this rank's vocabulary slice looked up, summed over the group (g), then the
    // positions of this rank's rows added once.
    std::copy(tokens, tokens + N, s.tokens.begin());
    Before(embedding_unit_, Pass::kForward);
    if (tp_->sequence_parallel()) {
      ops::EmbeddingForward(rows_out_.data(), tokens, weight(wte_), v0_, Vs_, N, C);
      tp_->ReduceScatterToSequence(rows_out_.data(), s.input.data(), N, C);
    } else {
      ops::EmbeddingForward(s.input.data(), tokens, weight(wte_), v0_, Vs_, N, C);
      tp_->ReduceFromRegion(s.input.data(), static_cast<size_t>(N) * C);
    }
    ops::PositionForward(s.input.data(), weight(wpe_), FirstRow(N), held, T, C);
    Round(s.input.data(), static_cast<size_t>(held) * C);
    After(embedding_unit_, Pass::kForward);
  } else {
    std::copy(input, input + static_cast<size_t>(held) * C, s.input.begin());
  }
  const float* x = s.input.data();
  for (int l = ch.first_block; l < ch.end_block; ++l) {
    BlockActivations& a = s.blocks[l - ch.first_block];
    Before(BlockUnit(l), Pass::kForward);
    BlockActivations& w = OpenBlock(a, B, T, /*unpack=*/false);
    BlockForward(l, w, x, B, T);
    if (mixed()) {
      std::copy(w.out.begin(), w.out.begin() + static_cast<size_t>(held) * C, ch.x.begin());
    }
    CloseBlock(a, B, T, /*pack=*/true);
    After(BlockUnit(l), Pass::kForward);
    x = mixed() ? ch.x.data() : a.out.data();
  }
  if (!ch.head) return 0.0;
  Before(lnf_unit_, Pass::kForward);
  ops::LayerNormForward(s.lnf.data(), s.lnf_mean.data(), s.lnf_rstd.data(), x, weight(lnf_w_),
                        weight(lnf_b_), held, C);
  Round(s.lnf.data(), static_cast<size_t>(held) * C);
  After(lnf_unit_, Pass::kForward);
  // The tied head, column-parallel over the vocabulary: this rank's slice of the logits.
  Before(head_unit_, Pass::kForward);
  const float* lnf = GatherRows(s.lnf.data(), rows_in_.data(), N, C);
  ops::MatmulForward(s.logits.data(), lnf, weight(head_wte_), nullptr, nullptr, N, C, Vs_);
  Round(s.logits.data(), static_cast<size_t>(N) * Vs_);
  After(head_unit_, Pass::kForward);
  if (targets == nullptr) return 0.0;
  std::copy(targets, targets + N, s.targets.begin());
  return CrossEntropy(s, targets, N);
}

const float* Gpt::ChunkOutput(int chunk, int slot) {
  Chunk& ch = chunks_[chunk];
  Slot& s = ch.slots[slot];
  return s.blocks.empty() ? s.input.data()
                          : BlockOutput(ch, s, static_cast<int>(s.blocks.size()) - 1);
}

void Gpt::GatherLogits(int slot, int row, float* out) {
  const Slot& s = chunks_.back().slots[slot];
  tp_->GatherFromSequence(s.logits.data() + static_cast<size_t>(row) * Vs_, out, tp_->size(), Vs_);
}

void Gpt::ChunkBackward(int chunk, int slot, const float* dout, float loss_scale,
                        const std::function<void(int tensor)>& on_ready) {
  const int C = C_;
  Chunk& ch = chunks_[chunk];
  Slot& s = ch.slots[slot];
  const int B = s.B;
  const int T = s.T;
  const int N = B * T;
  const int held = HeldRows(N);
  float* dres = ch.dres.data();
  using Pass = UnitHooks::Pass;
  if (ch.head) {
    // The loss and the tied head; probs becomes dlogits in place.
    const float* last = s.blocks.empty()
                            ? s.input.data()
                            : BlockOutput(ch, s, static_cast<int>(s.blocks.size()) - 1);
    ops::SoftmaxCrossEntropyBackward(s.probs.data(), s.probs.data(), s.targets.data(), v0_,
                                     loss_scale, N, Vs_);
    Round(s.probs.data(), static_cast<size_t>(N) * Vs_);
    Before(head_unit_, Pass::kBackward);
    const float* lnf = GatherRows(s.lnf.data(), rows_in_.data(), N, C);
    ops::MatmulBackward(dC_.data(), grad(head_wte_), nullptr, s.probs.data(), lnf,
                        weight(head_wte_), N, C, Vs_);
    After(head_unit_, Pass::kBackward);
    if (head_wte_ != wte_) on_ready(head_wte_);
    float* dlnf = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
    Round(dlnf, static_cast<size_t>(held) * C);
    std::fill(dres, dres + static_cast<size_t>(held) * C, 0.0f);
    Before(lnf_unit_, Pass::kBackward);
    ops::LayerNormBackward(dres, grad(lnf_w_), grad(lnf_b_), dlnf, last, weight(lnf_w_),
                           s.lnf_mean.data(), s.lnf_rstd.data(), held, C);
    Round(dres, static_cast<size_t>(held) * C);
    on_ready(lnf_b_);
    on_ready(lnf_w_);
    After(lnf_unit_, Pass::kBackward);
  } else {
    std::copy(dout, dout + static_cast<size_t>(held) * C, dres);
  }
  for (int l = ch.end_block - 1; l >= ch.first_block; --l) {
    const int i = l - ch.first_block;
    const float* x = i > 0 ? BlockOutput(ch, s, i - 1) : s.input.data();
    BlockActivations& a = s.blocks[i];
    Before(BlockUnit(l), Pass::kBackward);
    BlockActivations& w = OpenBlock(a, B, T, /*unpack=*/true);
    if (a.mode == Recompute::kFull) BlockForward(l, w, x, B, T);
    if (a.mode == Recompute::kSelective) AttentionCore(w, B, T);
    BlockBackward(l, w, x, dres, B, T, on_ready);
    CloseBlock(a, B, T, /*pack=*/false);
    After(BlockUnit(l), Pass::kBackward);
  }
  if (!ch.embedding) return;
  // Embedding: positions from this rank's rows; the vocabulary slice from every row.
  Before(embedding_unit_, Pass::kBackward, /*reads_params=*/false);
  ops::PositionBackward(grad(wpe_), dres, FirstRow(N), held, T, C);
  const float* demb = GatherRows(dres, rows_out_.data(), N, C);
  ops::EmbeddingBackward(grad(wte_), demb, s.tokens.data(), v0_, Vs_, N, C);
  on_ready(wpe_);
  on_ready(wte_);
  After(embedding_unit_, Pass::kBackward);
}

}  // namespace weft::trainer
