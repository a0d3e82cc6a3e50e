#include "model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ops.h"
#include "rng.h"

namespace weft::trainer {

Gpt::Gpt(const ModelShape& shape, int max_batch, size_t pad_quantum)
    : shape_(shape), max_batch_(max_batch), layout_(pad_quantum) {
  const int C = shape.n_embd;
  wte_ = layout_.Add("wte", {shape.vocab, C}, true);
  wpe_ = layout_.Add("wpe", {shape.seq_len, C}, true);
  layout_.EndUnit("embeddings");
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockTensors b;
    b.ln1_w = layout_.Add(p + "ln1.w", {C}, false);
    b.ln1_b = layout_.Add(p + "ln1.b", {C}, false);
    b.qkv_w = layout_.Add(p + "attn.qkv.w", {3 * C, C}, true);
    b.qkv_b = layout_.Add(p + "attn.qkv.b", {3 * C}, false);
    b.proj_w = layout_.Add(p + "attn.proj.w", {C, C}, true);
    b.proj_b = layout_.Add(p + "attn.proj.b", {C}, false);
    b.ln2_w = layout_.Add(p + "ln2.w", {C}, false);
    b.ln2_b = layout_.Add(p + "ln2.b", {C}, false);
    b.fc_w = layout_.Add(p + "mlp.fc.w", {4 * C, C}, true);
    b.fc_b = layout_.Add(p + "mlp.fc.b", {4 * C}, false);
    b.fcproj_w = layout_.Add(p + "mlp.proj.w", {C, 4 * C}, true);
    b.fcproj_b = layout_.Add(p + "mlp.proj.b", {C}, false);
    blocks_.push_back(b);
    layout_.EndUnit("h." + std::to_string(l));
  }
  lnf_w_ = layout_.Add("lnf.w", {C}, false);
  lnf_b_ = layout_.Add("lnf.b", {C}, false);
  layout_.EndUnit("lnf");
  params_ = shard::FlatBuffer(layout_.total());
  grads_ = shard::FlatBuffer(layout_.total());
  ResetUnitStorage();

  const size_t BT = static_cast<size_t>(max_batch) * shape.seq_len;
  const size_t att = static_cast<size_t>(max_batch) * shape.n_head * shape.seq_len * shape.seq_len;
  encoded_.resize(BT * C);
  acts_.resize(shape.n_layer);
  for (BlockActivations& a : acts_) {
    a.ln1.resize(BT * C);
    a.ln1_mean.resize(BT);
    a.ln1_rstd.resize(BT);
    a.qkv.resize(BT * 3 * C);
    a.att.resize(att);
    a.atty.resize(BT * C);
    a.res2.resize(BT * C);
    a.ln2.resize(BT * C);
    a.ln2_mean.resize(BT);
    a.ln2_rstd.resize(BT);
    a.fch.resize(BT * 4 * C);
    a.fch_gelu.resize(BT * 4 * C);
    a.out.resize(BT * C);
  }
  lnf_.resize(BT * C);
  lnf_mean_.resize(BT);
  lnf_rstd_.resize(BT);
  logits_.resize(BT * shape.vocab);
  probs_.resize(BT * shape.vocab);
  dres_.resize(BT * C);
  dC_.resize(BT * C);
  d3C_.resize(BT * 3 * C);
  d4C_.resize(BT * 4 * C);
  datt_.resize(static_cast<size_t>(shape.seq_len) * shape.seq_len);
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
      for (size_t i = 0; i < t.size; ++i) p[i] = std * IndexedNormal(seed, t.name, i);
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

void Gpt::BlockForward(int l, const float* x, int B, int T) {
  const BlockTensors& w = blocks_[l];
  BlockActivations& a = acts_[l];
  const int C = shape_.n_embd;
  const int N = B * T;
  ops::LayerNormForward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(w.ln1_w),
                        param(w.ln1_b), N, C);
  ops::MatmulForward(a.qkv.data(), a.ln1.data(), param(w.qkv_w), param(w.qkv_b), nullptr, N, C,
                     3 * C);
  ops::AttentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, C, shape_.n_head);
  ops::MatmulForward(a.res2.data(), a.atty.data(), param(w.proj_w), param(w.proj_b), x, N, C, C);
  ops::LayerNormForward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                        param(w.ln2_w), param(w.ln2_b), N, C);
  ops::MatmulForward(a.fch.data(), a.ln2.data(), param(w.fc_w), param(w.fc_b), nullptr, N, C,
                     4 * C);
  ops::GeluForward(a.fch_gelu.data(), a.fch.data(), N * 4 * C);
  ops::MatmulForward(a.out.data(), a.fch_gelu.data(), param(w.fcproj_w), param(w.fcproj_b),
                     a.res2.data(), N, 4 * C, C);
}

void Gpt::BlockBackward(int l, const float* x, float* dres, int B, int T,
                        const std::function<void(int tensor)>& on_ready) {
  const BlockTensors& w = blocks_[l];
  BlockActivations& a = acts_[l];
  const int C = shape_.n_embd;
  const int N = B * T;
  // MLP: out = res2 + proj(gelu(fc(ln2(res2)))); dres flows to res2 unchanged plus the branch.
  ops::MatmulBackward(d4C_.data(), grad(w.fcproj_w), grad(w.fcproj_b), dres, a.fch_gelu.data(),
                      param(w.fcproj_w), N, 4 * C, C);
  ops::GeluBackward(d4C_.data(), a.fch.data(), d4C_.data(), N * 4 * C);
  ops::MatmulBackward(dC_.data(), grad(w.fc_w), grad(w.fc_b), d4C_.data(), a.ln2.data(),
                      param(w.fc_w), N, C, 4 * C);
  ops::LayerNormBackward(dres, grad(w.ln2_w), grad(w.ln2_b), dC_.data(), a.res2.data(),
                         param(w.ln2_w), a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  // Attention: res2 = x + proj(attn(qkv(ln1(x)))).
  ops::MatmulBackward(dC_.data(), grad(w.proj_w), grad(w.proj_b), dres, a.atty.data(),
                      param(w.proj_w), N, C, C);
  ops::AttentionBackward(d3C_.data(), datt_.data(), dC_.data(), a.qkv.data(), a.att.data(), B, T, C,
                         shape_.n_head);
  ops::MatmulBackward(dC_.data(), grad(w.qkv_w), grad(w.qkv_b), d3C_.data(), a.ln1.data(),
                      param(w.qkv_w), N, C, 3 * C);
  ops::LayerNormBackward(dres, grad(w.ln1_w), grad(w.ln1_b), dC_.data(), x, param(w.ln1_w),
                         a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
  for (int t : {w.fcproj_b, w.fcproj_w, w.fc_b, w.fc_w, w.ln2_b, w.ln2_w, w.proj_b, w.proj_w,
                w.qkv_b, w.qkv_w, w.ln1_b, w.ln1_w}) {
    on_ready(t);
  }
}

double Gpt::Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T) {
  const int C = shape_.n_embd;
  const int N = B * T;
  tokens_ = tokens;
  targets_ = targets;
  B_ = B;
  T_ = T;
  using Pass = UnitHooks::Pass;
  const int embeddings = 0, final_norm = shape_.n_layer + 1;
  Before(embeddings, Pass::kForward);
  ops::EncoderForward(encoded_.data(), tokens, param(wte_), param(wpe_), B, T, C);
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
                        param(lnf_b_), N, C);
  After(final_norm, Pass::kForward);
  Before(embeddings, Pass::kForward);  // the tied head
  ops::MatmulForward(logits_.data(), lnf_.data(), param(wte_), nullptr, nullptr, N, C,
                     shape_.vocab);
  After(embeddings, Pass::kForward);
  if (targets == nullptr) return 0.0;
  return ops::SoftmaxCrossEntropyForward(probs_.data(), logits_.data(), targets, N, shape_.vocab);
}

void Gpt::Backward(float loss_scale, const std::function<void(int tensor)>& on_ready) {
  const int C = shape_.n_embd;
  const int B = B_;
  const int T = T_;
  const int N = B * T;
  const float* last = shape_.n_layer > 0 ? acts_.back().out.data() : encoded_.data();
  // The loss and the tied head; probs_ becomes dlogits in place.
  using Pass = UnitHooks::Pass;
  const int embeddings = 0, final_norm = shape_.n_layer + 1;
  ops::SoftmaxCrossEntropyBackward(probs_.data(), probs_.data(), targets_, loss_scale, N,
                                   shape_.vocab);
  Before(embeddings, Pass::kBackward);  // the tied head
  ops::MatmulBackward(dC_.data(), grad(wte_), nullptr, probs_.data(), lnf_.data(), param(wte_), N,
                      C, shape_.vocab);
  After(embeddings, Pass::kBackward);
  std::fill(dres_.begin(), dres_.begin() + static_cast<size_t>(N) * C, 0.0f);
  Before(final_norm, Pass::kBackward);
  ops::LayerNormBackward(dres_.data(), grad(lnf_w_), grad(lnf_b_), dC_.data(), last, param(lnf_w_),
                         lnf_mean_.data(), lnf_rstd_.data(), N, C);
  on_ready(lnf_b_);
  on_ready(lnf_w_);
  After(final_norm, Pass::kBackward);
  for (int l = shape_.n_layer - 1; l >= 0; --l) {
    const float* x = l > 0 ? acts_[l - 1].out.data() : encoded_.data();
    Before(l + 1, Pass::kBackward);
    BlockBackward(l, x, dres_.data(), B, T, on_ready);
    After(l + 1, Pass::kBackward);
  }
  Before(embeddings, Pass::kBackward, /*reads_params=*/false);
  ops::EncoderBackward(grad(wte_), grad(wpe_), dres_.data(), tokens_, B, T, C);
  on_ready(wpe_);
  on_ready(wte_);
  After(embeddings, Pass::kBackward);
}

}  // namespace weft::trainer
