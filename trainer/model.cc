#include "model.h"

#include <algorithm>
#include <cmath>
#include <string>

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

Gpt::Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum, TensorParallel* tp)
    : shape_(shape), max_batch_(max_batch), tp_(tp != nullptr ? tp : &solo_), layout_(pad_quantum) {
  const int t = tp_->size(), r = tp_->rank();
  const int C = shape.n_embd;
  C_ = C;
  Ca_ = C / t;
  NHa_ = shape.n_head / t;
  H_ = 4 * C / t;
  Vs_ = shape.vocab / t;
  v0_ = r * Vs_;
  const int V = shape.vocab;
  wte_ = layout_.AddPart("wte", {V, C}, {Vs_, C}, RowPart(V, C, 1, t, r), true);
  wpe_ = layout_.Add("wpe", {shape.seq_len, C}, true);
  layout_.EndUnit("embeddings");
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockTensors b;
    b.ln1_w = layout_.Add(p + "ln1.w", {C}, false);
    b.ln1_b = layout_.Add(p + "ln1.b", {C}, false);
    b.qkv_w = layout_.AddPart(p + "attn.qkv.w", {3 * C, C}, {3 * Ca_, C},
                              RowPart(3 * C, C, 3, t, r), true);
    b.qkv_b =
        layout_.AddPart(p + "attn.qkv.b", {3 * C}, {3 * Ca_}, RowPart(3 * C, 1, 3, t, r), false);
    b.proj_w = layout_.AddPart(p + "attn.proj.w", {C, C}, {C, Ca_}, ColumnPart(C, C, t, r), true);
    b.proj_b = layout_.Add(p + "attn.proj.b", {C}, false);
    b.ln2_w = layout_.Add(p + "ln2.w", {C}, false);
    b.ln2_b = layout_.Add(p + "ln2.b", {C}, false);
    b.fc_w = layout_.AddPart(p + "mlp.fc.w", {4 * C, C}, {H_, C}, RowPart(4 * C, C, 1, t, r), true);
    b.fc_b = layout_.AddPart(p + "mlp.fc.b", {4 * C}, {H_}, RowPart(4 * C, 1, 1, t, r), false);
    b.fcproj_w =
        layout_.AddPart(p + "mlp.proj.w", {C, 4 * C}, {C, H_}, ColumnPart(C, 4 * C, t, r), true);
    b.fcproj_b = layout_.Add(p + "mlp.proj.b", {C}, false);
    blocks_.push_back(b);
    layout_.EndUnit("h." + std::to_string(l));
  }
  lnf_w_ = layout_.Add("lnf.w", {C}, false);
  lnf_b_ = layout_.Add("lnf.b", {C}, false);
  layout_.EndUnit("lnf");
  if (tp_->sequence_parallel()) {
    // Computed from this rank's token rows only (the row-parallel biases see the gathered rows).
    for (const BlockTensors& b : blocks_) {
      for (int t : {b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b}) layout_.MarkPartialGradient(t);
    }
    for (int t : {wpe_, lnf_w_, lnf_b_}) layout_.MarkPartialGradient(t);
  }
  params_ = shard::FlatBuffer(layout_.total());
  grads_ = shard::FlatBuffer(layout_.total());
  ResetUnitStorage();

  const size_t BT = static_cast<size_t>(max_batch) * shape.seq_len;
  const size_t held = BT / row_multiple();
  const size_t att = static_cast<size_t>(max_batch) * NHa_ * shape.seq_len * shape.seq_len;
  encoded_.resize(held * C);
  acts_.resize(shape.n_layer);
  for (BlockActivations& a : acts_) {
    a.ln1.resize(held * C);
    a.ln1_mean.resize(held);
    a.ln1_rstd.resize(held);
    a.qkv.resize(BT * 3 * Ca_);
    a.att.resize(att);
    a.atty.resize(BT * Ca_);
    a.res2.resize(held * C);
    a.ln2.resize(held * C);
    a.ln2_mean.resize(held);
    a.ln2_rstd.resize(held);
    a.fch.resize(BT * H_);
    a.fch_gelu.resize(BT * H_);
    a.out.resize(held * C);
  }
  lnf_.resize(held * C);
  lnf_mean_.resize(held);
  lnf_rstd_.resize(held);
  logits_.resize(BT * Vs_);
  probs_.resize(BT * Vs_);
  ce_maxes_.resize(BT);
  ce_sums_.resize(2 * BT);
  dres_.resize(held * C);
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

size_t Gpt::ActivationBytes(int B, int T) const {
  const size_t N = static_cast<size_t>(B) * T, held = HeldRows(B * T), C = C_;
  const size_t block = held * C * 4 + held * 4 + N * 3 * Ca_ +
                       static_cast<size_t>(B) * NHa_ * T * T + N * Ca_ + 2 * N * H_;
  const size_t ends = held * C + held * C + 2 * held + 2 * N * Vs_;  // encoded, lnf, probs
  return sizeof(float) * (block * shape_.n_layer + ends);
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

void Gpt::BlockForward(int l, const float* x, int B, int T) {
  const BlockTensors& w = blocks_[l];
  BlockActivations& a = acts_[l];
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  // Attention: res2 = x + proj(attn(qkv(ln1(x)))); QKV column-parallel (this rank's heads),
  // proj row-parallel.
  ops::LayerNormForward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(w.ln1_w),
                        param(w.ln1_b), held, C);
  const float* ln1 = GatherRows(a.ln1.data(), rows_in_.data(), N, C);
  ops::MatmulForward(a.qkv.data(), ln1, param(w.qkv_w), param(w.qkv_b), nullptr, N, C, 3 * Ca_);
  ops::AttentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, Ca_, NHa_);
  RowParallelForward(a.res2.data(), a.atty.data(), param(w.proj_w), param(w.proj_b), x, N, Ca_);
  // MLP: out = res2 + proj(gelu(fc(ln2(res2)))); fc column-parallel, proj row-parallel.
  ops::LayerNormForward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                        param(w.ln2_w), param(w.ln2_b), held, C);
  const float* ln2 = GatherRows(a.ln2.data(), rows_in_.data(), N, C);
  ops::MatmulForward(a.fch.data(), ln2, param(w.fc_w), param(w.fc_b), nullptr, N, C, H_);
  ops::GeluForward(a.fch_gelu.data(), a.fch.data(), N * H_);
  RowParallelForward(a.out.data(), a.fch_gelu.data(), param(w.fcproj_w), param(w.fcproj_b),
                     a.res2.data(), N, H_);
}

void Gpt::BlockBackward(int l, const float* x, float* dres, int B, int T,
                        const std::function<void(int tensor)>& on_ready) {
  const BlockTensors& w = blocks_[l];
  BlockActivations& a = acts_[l];
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  // MLP: out = res2 + proj(gelu(fc(ln2(res2)))); dres flows to res2 unchanged plus the branch.
  const float* dout = GatherRows(dres, rows_out_.data(), N, C);
  ops::MatmulBackward(d4C_.data(), grad(w.fcproj_w), grad(w.fcproj_b), dout, a.fch_gelu.data(),
                      param(w.fcproj_w), N, H_, C);
  ops::GeluBackward(d4C_.data(), a.fch.data(), d4C_.data(), N * H_);
  const float* ln2 = GatherRows(a.ln2.data(), rows_in_.data(), N, C);  // again: not kept
  ops::MatmulBackward(dC_.data(), grad(w.fc_w), grad(w.fc_b), d4C_.data(), ln2, param(w.fc_w), N, C,
                      H_);
  const float* dln2 = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
  ops::LayerNormBackward(dres, grad(w.ln2_w), grad(w.ln2_b), dln2, a.res2.data(), param(w.ln2_w),
                         a.ln2_mean.data(), a.ln2_rstd.data(), held, C);
  // Attention: res2 = x + proj(attn(qkv(ln1(x)))).
  dout = GatherRows(dres, rows_out_.data(), N, C);
  ops::MatmulBackward(dC_.data(), grad(w.proj_w), grad(w.proj_b), dout, a.atty.data(),
                      param(w.proj_w), N, Ca_, C);
  ops::AttentionBackward(d3C_.data(), datt_.data(), dC_.data(), a.qkv.data(), a.att.data(), B, T,
                         Ca_, NHa_);
  const float* ln1 = GatherRows(a.ln1.data(), rows_in_.data(), N, C);
  ops::MatmulBackward(dC_.data(), grad(w.qkv_w), grad(w.qkv_b), d3C_.data(), ln1, param(w.qkv_w), N,
                      C, 3 * Ca_);
  const float* dln1 = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
  ops::LayerNormBackward(dres, grad(w.ln1_w), grad(w.ln1_b), dln1, x, param(w.ln1_w),
                         a.ln1_mean.data(), a.ln1_rstd.data(), held, C);
  for (int t : {w.fcproj_b, w.fcproj_w, w.fc_b, w.fc_w, w.ln2_b, w.ln2_w, w.proj_b, w.proj_w,
                w.qkv_b, w.qkv_w, w.ln1_b, w.ln1_w}) {
    on_ready(t);
  }
}

double Gpt::CrossEntropy(const uint8_t* targets, int N) {
  if (tp_->size() == 1) {
    return ops::SoftmaxCrossEntropyForward(probs_.data(), logits_.data(), targets, N, Vs_);
  }
  float* maxes = ce_maxes_.data();
  float* sums = ce_sums_.data();  // N sums of exponentials, then N target logits
  ops::CrossEntropyMax(maxes, logits_.data(), N, Vs_);
  tp_->MaxFromRegion(maxes, N);
  ops::CrossEntropyExp(probs_.data(), sums, sums + N, logits_.data(), maxes, targets, v0_, N, Vs_);
  tp_->ReduceFromRegion(sums, 2 * static_cast<size_t>(N));
  return ops::CrossEntropyNormalize(probs_.data(), sums, maxes, sums + N, N, Vs_);
}

double Gpt::Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T) {
  const int C = C_;
  const int N = B * T;
  const int held = HeldRows(N);
  tokens_ = tokens;
  targets_ = targets;
  B_ = B;
  T_ = T;
  using Pass = UnitHooks::Pass;
  const int embeddings = 0, final_norm = shape_.n_layer + 1;
  // Embedding: this rank's vocabulary slice looked up, summed over the group (g), then the
  // positions of this rank's rows added once.
  Before(embeddings, Pass::kForward);
  if (tp_->sequence_parallel()) {
    ops::EmbeddingForward(rows_out_.data(), tokens, param(wte_), v0_, Vs_, N, C);
    tp_->ReduceScatterToSequence(rows_out_.data(), encoded_.data(), N, C);
  } else {
    ops::EmbeddingForward(encoded_.data(), tokens, param(wte_), v0_, Vs_, N, C);
    tp_->ReduceFromRegion(encoded_.data(), static_cast<size_t>(N) * C);
  }
  ops::PositionForward(encoded_.data(), param(wpe_), FirstRow(N), held, T, C);
  After(embeddings, Pass::kForward);
  const float* x = encoded_.data();
  for (int l = 0; l < shape_.n_layer; ++l) {
    Before(l + 1, Pass::kForward);
    BlockForward(l, x, B, T);
    After(l + 1, Pass::kForward);
    x = acts_[l].out.data();
  }
  Before(final_norm, Pass::kForward);
  ops::LayerNormForward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, param(lnf_w_),
                        param(lnf_b_), held, C);
  After(final_norm, Pass::kForward);
  // The tied head, column-parallel over the vocabulary: this rank's slice of the logits.
  Before(embeddings, Pass::kForward);
  const float* lnf = GatherRows(lnf_.data(), rows_in_.data(), N, C);
  ops::MatmulForward(logits_.data(), lnf, param(wte_), nullptr, nullptr, N, C, Vs_);
  After(embeddings, Pass::kForward);
  if (targets == nullptr) return 0.0;
  return CrossEntropy(targets, N);
}

void Gpt::GatherLogits(int row, float* out) {
  tp_->GatherFromSequence(logits_.data() + static_cast<size_t>(row) * Vs_, out, tp_->size(), Vs_);
}

void Gpt::Backward(float loss_scale, const std::function<void(int tensor)>& on_ready) {
  const int C = C_;
  const int B = B_;
  const int T = T_;
  const int N = B * T;
  const int held = HeldRows(N);
  const float* last = shape_.n_layer > 0 ? acts_.back().out.data() : encoded_.data();
  // The loss and the tied head; probs_ becomes dlogits in place.
  using Pass = UnitHooks::Pass;
  const int embeddings = 0, final_norm = shape_.n_layer + 1;
  ops::SoftmaxCrossEntropyBackward(probs_.data(), probs_.data(), targets_, v0_, loss_scale, N, Vs_);
  Before(embeddings, Pass::kBackward);  // the tied head
  const float* lnf = GatherRows(lnf_.data(), rows_in_.data(), N, C);
  ops::MatmulBackward(dC_.data(), grad(wte_), nullptr, probs_.data(), lnf, param(wte_), N, C, Vs_);
  After(embeddings, Pass::kBackward);
  const float* dlnf = SumRows(dC_.data(), dCrows_.data(), N, C);  // f
  std::fill(dres_.begin(), dres_.begin() + static_cast<size_t>(held) * C, 0.0f);
  Before(final_norm, Pass::kBackward);
  ops::LayerNormBackward(dres_.data(), grad(lnf_w_), grad(lnf_b_), dlnf, last, param(lnf_w_),
                         lnf_mean_.data(), lnf_rstd_.data(), held, C);
  on_ready(lnf_b_);
  on_ready(lnf_w_);
  After(final_norm, Pass::kBackward);
  for (int l = shape_.n_layer - 1; l >= 0; --l) {
    const float* x = l > 0 ? acts_[l - 1].out.data() : encoded_.data();
    Before(l + 1, Pass::kBackward);
    BlockBackward(l, x, dres_.data(), B, T, on_ready);
    After(l + 1, Pass::kBackward);
  }
  // Embedding: positions from this rank's rows; the vocabulary slice from every row.
  Before(embeddings, Pass::kBackward, /*reads_params=*/false);
  ops::PositionBackward(grad(wpe_), dres_.data(), FirstRow(N), held, T, C);
  const float* demb = GatherRows(dres_.data(), rows_out_.data(), N, C);
  ops::EmbeddingBackward(grad(wte_), demb, tokens_, v0_, Vs_, N, C);
  on_ready(wpe_);
  on_ready(wte_);
  After(embeddings, Pass::kBackward);
}

}  // namespace weft::trainer
