// Finite-difference checks of every op's backward, and of the whole model's gradients.
//
// Each op is checked through a scalar L = Σ out · g for a fixed random g: the analytic gradient
// is the op's backward fed with dout = g; the numerical one is the central difference
// (L(x + ε) − L(x − ε)) / 2ε, evaluated in double from fp32 outputs. With ε = 1e-2 the fp32
// rounding and truncation errors stay near 1e-4, so the tolerance is |num − ana| ≤ 2e-3 +
// 2e-2·|ana|; a wrong backward is off by O(|ana|) and fails.
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model.h"
#include "ops.h"
#include "rng.h"

namespace weft::trainer {
namespace {

constexpr float kEps = 1e-2f;
constexpr double kAbsTol = 2e-3;
constexpr double kRelTol = 2e-2;

std::vector<float> Random(size_t n, Rng* rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * rng->Normal();
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Compares `analytic` with central differences of `loss` with respect to every element of `x`.
void ExpectGradient(const std::string& what, std::vector<float>* x,
                    const std::vector<float>& analytic, const std::function<double()>& loss) {
  ASSERT_EQ(x->size(), analytic.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    const float saved = (*x)[i];
    (*x)[i] = saved + kEps;
    const double plus = loss();
    (*x)[i] = saved - kEps;
    const double minus = loss();
    (*x)[i] = saved;
    const double numeric = (plus - minus) / (2.0 * kEps);
    if (std::abs(numeric - analytic[i]) > kAbsTol + kRelTol * std::abs(analytic[i])) {
      if (++failures <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric "
                      << numeric;
      }
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << x->size() << " elements off";
}

TEST(GradCheck, Encoder) {
  Rng rng(1);
  const int B = 2, T = 3, C = 4, V = 5;
  std::vector<uint8_t> tokens = {0, 3, 3, 4, 1, 0};
  std::vector<float> wte = Random(V * C, &rng), wpe = Random(T * C, &rng);
  const std::vector<float> g = Random(B * T * C, &rng);
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    ops::EmbeddingForward(out.data(), tokens.data(), wte.data(), 0, V, B * T, C);
    ops::PositionForward(out.data(), wpe.data(), 0, B * T, T, C);
    return Dot(out, g);
  };
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  ops::EmbeddingBackward(dwte.data(), g.data(), tokens.data(), 0, V, B * T, C);
  ops::PositionBackward(dwpe.data(), g.data(), 0, B * T, T, C);
  ExpectGradient("encoder wte", &wte, dwte, loss);
  ExpectGradient("encoder wpe", &wpe, dwpe, loss);
}

TEST(GradCheck, LayerNorm) {
  Rng rng(2);
  const int N = 3, C = 8;
  std::vector<float> x = Random(N * C, &rng, 2.0f), w = Random(C, &rng), b = Random(C, &rng);
  const std::vector<float> g = Random(N * C, &rng);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    ops::LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return Dot(out, g);
  };
  loss();
  // Backward accumulates: start dx from a known value and subtract it again.
  std::vector<float> dx(N * C, 0.5f), dw(C, 0.0f), db(C, 0.0f);
  ops::LayerNormBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
  for (float& v : dx) v -= 0.5f;
  ExpectGradient("layernorm x", &x, dx, loss);
  ExpectGradient("layernorm w", &w, dw, loss);
  ExpectGradient("layernorm b", &b, db, loss);
}

TEST(GradCheck, MatmulWithBiasAndResidual) {
  Rng rng(3);
  const int N = 5, C = 6, OC = 7;
  std::vector<float> x = Random(N * C, &rng), w = Random(OC * C, &rng), bias = Random(OC, &rng),
                     residual = Random(N * OC, &rng);
  const std::vector<float> g = Random(N * OC, &rng);
  std::vector<float> out(N * OC);
  auto loss = [&] {
    ops::MatmulForward(out.data(), x.data(), w.data(), bias.data(), residual.data(), N, C, OC);
    return Dot(out, g);
  };
  std::vector<float> dx(N * C, 7.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  ops::MatmulBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), N, C, OC);
  ExpectGradient("matmul x", &x, dx, loss);
  ExpectGradient("matmul w", &w, dw, loss);
  ExpectGradient("matmul bias", &bias, db, loss);
  // The residual passes straight through: its gradient is g.
  ExpectGradient("matmul residual", &residual, g, loss);
}

TEST(GradCheck, MatmulWithoutBias) {
  Rng rng(4);
  const int N = 4, C = 3, OC = 5;
  std::vector<float> x = Random(N * C, &rng), w = Random(OC * C, &rng);
  const std::vector<float> g = Random(N * OC, &rng);
  std::vector<float> out(N * OC);
  auto loss = [&] {
    ops::MatmulForward(out.data(), x.data(), w.data(), nullptr, nullptr, N, C, OC);
    return Dot(out, g);
  };
  std::vector<float> dx(N * C), dw(OC * C, 0.0f);
  ops::MatmulBackward(dx.data(), dw.data(), nullptr, g.data(), x.data(), w.data(), N, C, OC);
  ExpectGradient("matmul x", &x, dx, loss);
  ExpectGradient("matmul w", &w, dw, loss);
}

TEST(GradCheck, CausalAttention) {
  Rng rng(5);
  const int B = 2, T = 5, C = 8, NH = 2;
  std::vector<float> qkv = Random(B * T * 3 * C, &rng);
  const std::vector<float> g = Random(B * T * C, &rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  auto loss = [&] {
    ops::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return Dot(out, g);
  };
  loss();
  // Causality: the first position attends only to itself.
  for (int h = 0; h < NH; ++h) EXPECT_FLOAT_EQ(att[h * T * T], 1.0f);
  EXPECT_EQ(att[1], 0.0f);
  std::vector<float> dqkv(qkv.size(), 3.0f), datt(T * T);
  ops::AttentionBackward(dqkv.data(), datt.data(), g.data(), qkv.data(), att.data(), B, T, C, NH);
  ExpectGradient("attention qkv", &qkv, dqkv, loss);
}

TEST(GradCheck, Gelu) {
  Rng rng(6);
  const int n = 64;
  std::vector<float> x = Random(n, &rng, 3.0f);
  const std::vector<float> g = Random(n, &rng);
  std::vector<float> out(n);
  auto loss = [&] {
    ops::GeluForward(out.data(), x.data(), n);
    return Dot(out, g);
  };
  loss();
  // Against the definition, with libm's tanh.
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    const double ref = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(out[i], ref, 1e-6 + 1e-6 * std::abs(ref)) << "gelu(" << v << ")";
  }
  std::vector<float> dx(n);
  ops::GeluBackward(dx.data(), x.data(), g.data(), n);
  ExpectGradient("gelu x", &x, dx, loss);
}

TEST(GradCheck, Residual) {
  std::vector<float> a = {1, 2, 3}, b = {0.5f, -2, 4}, out(3);
  ops::ResidualForward(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 7}));
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  Rng rng(7);
  const int N = 4, V = 9;
  std::vector<float> logits = Random(N * V, &rng, 2.0f);
  const std::vector<uint8_t> targets = {0, 8, 3, 3};
  std::vector<float> probs(N * V);
  auto loss = [&] {
    return ops::SoftmaxCrossEntropyForward(probs.data(), logits.data(), targets.data(), N, V);
  };
  const double total = loss();
  double expected = 0;
  for (int n = 0; n < N; ++n) {
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(static_cast<double>(logits[n * V + v]));
    expected += std::log(z) - logits[n * V + targets[n]];
  }
  EXPECT_NEAR(total, expected, 1e-5 * std::abs(expected));
  std::vector<float> dlogits(N * V);
  ops::SoftmaxCrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), 0, 1.0f, N, V);
  ExpectGradient("cross-entropy logits", &logits, dlogits, loss);
}

// The whole model: loss = summed cross-entropy (the sum keeps gradients well above the
// tolerance's absolute floor); a sample of elements of every tensor.
TEST(GradCheck, WholeModelEveryTensor) {
  ModelShape shape;
  shape.n_layer = 2;
  shape.n_head = 2;
  shape.n_embd = 8;
  shape.seq_len = 6;
  const int B = 2, T = 6;
  Gpt model(shape, B);
  model.InitParams(42);
  // Larger weights than GPT-2's init make every path's gradient visible above rounding.
  Rng rng(8);
  for (size_t i = 0; i < model.num_params(); ++i) model.params()[i] += 0.3f * rng.Normal();
  std::vector<uint8_t> tokens(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<uint8_t>(rng.Next() % 256);
    targets[i] = static_cast<uint8_t>(rng.Next() % 256);
  }
  const float scale = 1.0f;
  model.ZeroGrads();
  model.Forward(tokens.data(), targets.data(), B, T);
  std::vector<int> order;
  model.Backward(scale, [&](int t) { order.push_back(t); });
  // Every tensor is reported once; the embeddings (needed by the head and the input) come last.
  const int n_tensors = static_cast<int>(model.layout().tensors().size());
  ASSERT_EQ(static_cast<int>(order.size()), n_tensors);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), order.size());
  EXPECT_EQ(order[n_tensors - 1], model.layout().Find("wte"));
  EXPECT_EQ(order[n_tensors - 2], model.layout().Find("wpe"));

  const std::vector<float> grads(model.grads(), model.grads() + model.num_params());
  auto loss = [&] { return model.Forward(tokens.data(), targets.data(), B, T) * scale; };
  for (const TensorView& t : model.layout().tensors()) {
    std::vector<float> x, analytic;
    std::vector<size_t> picked;
    for (size_t i = 0; i < t.size && picked.size() < 12; i += 1 + t.size / 12) picked.push_back(i);
    for (size_t i : picked) {
      x.push_back(model.params()[t.offset + i]);
      analytic.push_back(grads[t.offset + i]);
    }
    // Perturb the model's own parameters through the copy.
    std::vector<float> probe = x;
    auto probe_loss = [&] {
      for (size_t k = 0; k < picked.size(); ++k) model.params()[t.offset + picked[k]] = probe[k];
      return loss();
    };
    ExpectGradient("model " + t.name, &probe, analytic, probe_loss);
    for (size_t k = 0; k < picked.size(); ++k) model.params()[t.offset + picked[k]] = x[k];
  }
}

}  // namespace
}  // namespace weft::trainer
