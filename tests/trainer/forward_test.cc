// The forward ops against references written here from their definitions and computed in
// double, on shapes wide enough (C ≥ 64, rows of T ≥ 17 for the softmax) that the 16-lane
// reduction loops run full iterations and their tails; and the initialisation as a pure function
// of (seed, tensor name, element index).
//
// Tolerance: |weft − reference| ≤ 1e-5 · (1 + |reference|). fp32 rounding over sums of ~256
// terms stays near 1e-6; a wrong formula (a missing bias, a variance with the wrong divisor, a
// non-causal mask, a missing 1/√hs) is off by 1e-2 or more.
#include <cblas.h>

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model.h"
#include "ops.h"
#include "rng.h"

namespace weft::trainer {
namespace {

constexpr double kTol = 1e-5;

// The trainer's default, one OpenBLAS thread per rank: the GEMMs then run on the test's thread
// (OpenBLAS's own pool is not instrumented, so ThreadSanitizer cannot follow its hand-offs).
class ForwardReference : public ::testing::Test {
 protected:
  void SetUp() override { openblas_set_num_threads(1); }
};

std::vector<float> Random(size_t n, Rng* rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * rng->Normal();
  return v;
}

void ExpectClose(const std::string& what, const std::vector<double>& reference, const float* got) {
  int failures = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (std::abs(got[i] - reference[i]) > kTol * (1.0 + std::abs(reference[i]))) {
      if (++failures <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: reference " << reference[i] << ", got " << got[i];
      }
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << reference.size() << " off";
}

TEST_F(ForwardReference, MatmulWithBiasAndResidual) {
  const int N = 37, C = 96, OC = 80;
  Rng rng(11);
  const std::vector<float> inp = Random(N * C, &rng), w = Random(OC * C, &rng, 0.1f),
                           bias = Random(OC, &rng), residual = Random(N * OC, &rng);
  std::vector<float> out(N * OC), plain(N * OC);
  ops::MatmulForward(out.data(), inp.data(), w.data(), bias.data(), residual.data(), N, C, OC);
  ops::MatmulForward(plain.data(), inp.data(), w.data(), nullptr, nullptr, N, C, OC);
  std::vector<double> ref(N * OC), ref_plain(N * OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += static_cast<double>(inp[n * C + c]) * w[o * C + c];
      ref_plain[n * OC + o] = s;
      ref[n * OC + o] = s + bias[o] + residual[n * OC + o];
    }
  }
  ExpectClose("matmul", ref, out.data());
  ExpectClose("matmul without bias or residual", ref_plain, plain.data());
}

TEST_F(ForwardReference, LayerNorm) {
  for (const int C : {64, 80, 70}) {  // whole 16-lane iterations, and a tail of 6
    const int N = 9;
    Rng rng(12 + C);
    std::vector<float> inp = Random(N * C, &rng, 3.0f);
    for (int n = 0; n < N; ++n) {
      for (int c = 0; c < C; ++c) inp[n * C + c] += static_cast<float>(n) - 4.0f;  // row offsets
    }
    const std::vector<float> w = Random(C, &rng), b = Random(C, &rng);
    std::vector<float> out(N * C), mean(N), rstd(N);
    ops::LayerNormForward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                          C);
    std::vector<double> ref(N * C), ref_mean(N), ref_rstd(N);
    for (int n = 0; n < N; ++n) {
      double m = 0, var = 0;
      for (int c = 0; c < C; ++c) m += inp[n * C + c];
      m /= C;
      for (int c = 0; c < C; ++c) var += (inp[n * C + c] - m) * (inp[n * C + c] - m);
      var /= C;  // biased variance, as GPT-2's LayerNorm
      const double s = 1.0 / std::sqrt(var + 1e-5);
      for (int c = 0; c < C; ++c) ref[n * C + c] = (inp[n * C + c] - m) * s * w[c] + b[c];
      ref_mean[n] = m;
      ref_rstd[n] = s;
    }
    const std::string width = " C=" + std::to_string(C);
    ExpectClose("layernorm" + width, ref, out.data());
    ExpectClose("layernorm mean" + width, ref_mean, mean.data());
    ExpectClose("layernorm rstd" + width, ref_rstd, rstd.data());
  }
}

TEST_F(ForwardReference, CausalAttention) {
  const int B = 2, T = 40, C = 64, NH = 2, hs = C / NH;
  Rng rng(13);
  const std::vector<float> qkv = Random(B * T * 3 * C, &rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  ops::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  std::vector<double> ref(B * T * C), ref_att(B * NH * T * T, 0.0);
  const auto at = [&](int b, int t, int part, int h, int i) {
    return static_cast<double>(qkv[(b * T + t) * 3 * C + part * C + h * hs + i]);
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        // Scores of the positions up to t, softmax, then the weighted sum of values.
        std::vector<double> p(t + 1);
        double maxv = -1e300, total = 0;
        for (int j = 0; j <= t; ++j) {
          double s = 0;
          for (int i = 0; i < hs; ++i) s += at(b, t, 0, h, i) * at(b, j, 1, h, i);
          p[j] = s / std::sqrt(static_cast<double>(hs));
          maxv = std::max(maxv, p[j]);
        }
        for (int j = 0; j <= t; ++j) total += (p[j] = std::exp(p[j] - maxv));
        for (int j = 0; j <= t; ++j) ref_att[((b * NH + h) * T + t) * T + j] = p[j] / total;
        for (int i = 0; i < hs; ++i) {
          double y = 0;
          for (int j = 0; j <= t; ++j) y += p[j] / total * at(b, j, 2, h, i);
          ref[(b * T + t) * C + h * hs + i] = y;
        }
      }
    }
  }
  ExpectClose("attention probabilities", ref_att, att.data());
  ExpectClose("attention output", ref, out.data());
}

TEST_F(ForwardReference, SoftmaxCrossEntropy) {
  const int N = 5, V = 256;
  Rng rng(14);
  const std::vector<float> logits = Random(N * V, &rng, 2.0f);
  const std::vector<uint8_t> targets = {0, 17, 255, 128, 3};
  std::vector<float> probs(N * V);
  const double loss =
      ops::SoftmaxCrossEntropyForward(probs.data(), logits.data(), targets.data(), N, V);
  double ref_loss = 0;
  std::vector<double> ref_probs(N * V);
  for (int n = 0; n < N; ++n) {
    double total = 0;
    for (int v = 0; v < V; ++v) total += std::exp(static_cast<double>(logits[n * V + v]));
    for (int v = 0; v < V; ++v) ref_probs[n * V + v] = std::exp(logits[n * V + v]) / total;
    ref_loss -= std::log(ref_probs[n * V + targets[n]]);
  }
  EXPECT_NEAR(loss, ref_loss, kTol * ref_loss);
  ExpectClose("softmax", ref_probs, probs.data());
}

TEST(Init, EachElementIsAPureFunctionOfSeedNameAndIndex) {
  // Two models of different depth share their first block's tensor names: every shared element
  // gets the same value, whatever else the layout holds.
  Gpt small({.n_layer = 1, .n_head = 2, .n_embd = 64, .seq_len = 16, .vocab = 256}, 1);
  Gpt deep({.n_layer = 3, .n_head = 2, .n_embd = 64, .seq_len = 16, .vocab = 256}, 1);
  small.InitParams(42);
  deep.InitParams(42);
  for (const TensorView& t : small.layout().tensors()) {
    if (t.name.starts_with("h.0.") && t.name.ends_with("proj.w")) continue;  // scaled by 1/√(2L)
    const int other = deep.layout().Find(t.name);
    ASSERT_GE(other, 0) << t.name;
    const float* a = small.params() + t.offset;
    const float* b = deep.params() + deep.layout().tensor(other).offset;
    for (size_t i = 0; i < t.size; ++i) ASSERT_EQ(a[i], b[i]) << t.name << "[" << i << "]";
  }
  // The value is exactly 0.02 · IndexedNormal(seed, name, index) for a plain matrix.
  const TensorView& qkv = deep.layout().tensor(deep.layout().Find("h.2.attn.qkv.w"));
  for (size_t i : {size_t{0}, size_t{1}, qkv.size - 1}) {
    EXPECT_EQ(deep.params()[qkv.offset + i], 0.02f * IndexedNormal(42, "h.2.attn.qkv.w", i));
  }
}

TEST(Init, IndexedNormalIsStandardNormalAndDependsOnEveryInput) {
  const int n = 200000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = IndexedNormal(7, "wte", i);
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  EXPECT_NE(IndexedNormal(7, "wte", 5), IndexedNormal(8, "wte", 5));
  EXPECT_NE(IndexedNormal(7, "wte", 5), IndexedNormal(7, "wpe", 5));
  EXPECT_NE(IndexedNormal(7, "wte", 5), IndexedNormal(7, "wte", 6));
}

}  // namespace
}  // namespace weft::trainer
