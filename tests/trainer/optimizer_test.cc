// AdamW, global-norm clipping and the learning-rate schedule against values worked out by hand
// in double from their textbook definitions (Loshchilov & Hutter's decoupled decay, Kingma & Ba's
// bias correction). fp32 arithmetic in the optimizer stays within 1e-6 relative of them; a wrong
// bias correction, a decay applied to a tensor that must not decay, or a decay folded into the
// gradient is off by far more.
#include "optimizer.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "gtest/gtest.h"
#include "param_layout.h"
#include "weft/offload/tiered_store.h"

namespace weft::trainer {
namespace {

constexpr double kRelTol = 1e-6;

void ExpectNear(double expected, double got, const char* what, int step, size_t i) {
  EXPECT_LE(std::abs(got - expected), kRelTol * std::abs(expected) + 1e-12)
      << what << " step " << step << " element " << i << ": expected " << expected << ", got "
      << got;
}

TEST(AdamW, MatchesHandWorkedStepsWithBiasCorrectionAndDecoupledDecay) {
  ParamLayout layout;
  layout.Add("w", {2, 2}, /*weight_decay=*/true);
  layout.Add("b", {3}, /*weight_decay=*/false);
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  AdamW adam(layout, settings);

  std::vector<float> params = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, -0.5f, 0.0f};
  std::vector<double> theta(params.begin(), params.end());
  std::vector<double> m(params.size(), 0.0), v(params.size(), 0.0);
  const double lrs[] = {1e-2, 3e-3, 5e-2};
  for (int step = 1; step <= 3; ++step) {
    // Gradients that change sign and size from step to step.
    std::vector<float> grads(params.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] =
          static_cast<float>((static_cast<int>(i) - 3) * 0.1 + 0.05 * step * (i % 2 ? 1 : -1));
    }
    const double lr = lrs[step - 1];
    ASSERT_TRUE(adam.Step({params.data()}, {grads.data()}, lr).ok());
    for (size_t i = 0; i < params.size(); ++i) {
      const double g = grads[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.95 * v[i] + 0.05 * g * g;
      const double m_hat = m[i] / (1.0 - std::pow(0.9, step));
      const double v_hat = v[i] / (1.0 - std::pow(0.95, step));
      const double decay = i < 4 ? 0.1 : 0.0;  // only the matrix decays
      theta[i] -= lr * (m_hat / (std::sqrt(v_hat) + 1e-8) + decay * theta[i]);
      ExpectNear(m[i], adam.m()[i], "m", step, i);
      ExpectNear(v[i], adam.v()[i], "v", step, i);
      ExpectNear(theta[i], params[i], "param", step, i);
    }
  }
  EXPECT_EQ(adam.step(), 3);
}

TEST(AdamW, FirstStepMovesEveryParameterByAboutTheLearningRate) {
  // With bias correction, m̂/√v̂ = sign(g) on step 1 whatever |g| is: a missing correction would
  // move parameters by (1-β1)/√(1-β2) ≈ 0.45 lr instead.
  ParamLayout layout;
  layout.Add("b", {4}, false);
  AdamW adam(layout, AdamWSettings{0.9, 0.95, 1e-8, 0.1});
  std::vector<float> params(4, 1.0f);
  const std::vector<float> grads = {1e-3f, -2.0f, 50.0f, -0.01f};
  ASSERT_TRUE(adam.Step({params.data()}, {grads.data()}, 0.01).ok());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(params[i], 1.0 - 0.01 * (grads[i] > 0 ? 1 : -1), 1e-6) << i;
  }
}

TEST(AdamW, OwnedRangesWhereverTheyLiveMatchTheWholeLayoutBitForBit) {
  // Two owned ranges, each cutting a tensor (the decayed matrix, the undecayed bias), held in
  // separate buffers: every owned element must follow the whole-layout update exactly, with the
  // decay of the tensor it belongs to, and the moments stay compact.
  ParamLayout layout;
  layout.Add("w", {2, 3}, /*weight_decay=*/true);
  layout.Add("b", {5}, /*weight_decay=*/false);
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  const std::vector<shard::Range> owned = {{1, 4}, {7, 3}};
  AdamW whole(layout, settings);
  AdamW ranges(layout, settings, owned);
  ASSERT_EQ(ranges.num_ranges(), 2u);
  ASSERT_EQ(ranges.owned_size(), 7u);

  std::vector<float> params(layout.total());
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.3f * static_cast<float>(i) - 1.1f;
  std::vector<std::vector<float>> slices;
  for (const shard::Range& r : owned) {
    slices.emplace_back(params.begin() + r.begin, params.begin() + r.begin + r.length);
  }
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> grads(params.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = static_cast<float>((static_cast<int>(i) - 5) * 0.07 + 0.02 * step);
    }
    ASSERT_TRUE(whole.Step({params.data()}, {grads.data()}, 1e-2 * step).ok());
    ASSERT_TRUE(ranges
                    .Step({slices[0].data(), slices[1].data()},
                          {grads.data() + owned[0].begin, grads.data() + owned[1].begin},
                          1e-2 * step)
                    .ok());
    size_t compact = 0;
    for (size_t r = 0; r < owned.size(); ++r) {
      for (size_t i = 0; i < owned[r].length; ++i, ++compact) {
        const size_t flat = owned[r].begin + i;
        EXPECT_EQ(slices[r][i], params[flat]) << "step " << step << " element " << flat;
        EXPECT_EQ(ranges.m()[compact], whole.m()[flat]) << "step " << step << " element " << flat;
        EXPECT_EQ(ranges.v()[compact], whole.v()[flat]) << "step " << step << " element " << flat;
      }
    }
  }
}

TEST(Clip, ReportsTheNormBeforeClippingAndScalesToMaxNorm) {
  std::vector<float> g = {3.0f, 4.0f, 0.0f, 12.0f};  // norm 13
  std::vector<float> original = g;
  EXPECT_DOUBLE_EQ(GlobalNorm(g.data(), g.size()), 13.0);
  ClipToNorm(g.data(), g.size(), 13.0, 0.0);  // 0: no clipping
  EXPECT_EQ(g, original);
  ClipToNorm(g.data(), g.size(), 13.0, 20.0);  // under the cap
  EXPECT_EQ(g, original);
  ClipToNorm(g.data(), g.size(), 13.0, 1.0);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], original[i] / 13.0, 1e-7) << i;
  EXPECT_NEAR(GlobalNorm(g.data(), g.size()), 1.0, 1e-6);
}

TEST(Clip, GlobalNormSumsEveryElementIncludingTheTail) {
  std::vector<float> g(19);
  double sum = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<float>(i) - 7.5f;
    sum += static_cast<double>(g[i]) * g[i];
  }
  EXPECT_NEAR(GlobalNorm(g.data(), g.size()), std::sqrt(sum), 1e-12 * std::sqrt(sum));
}

TEST(Schedule, WarmUpThenCosineToTheFloor) {
  const double lr = 1e-3, min_ratio = 0.1;
  const int64_t warmup = 10, total = 110;
  // Linear warm-up: step s (from 0) uses lr · (s+1)/warmup, reaching lr at its last step.
  EXPECT_DOUBLE_EQ(LearningRate(0, total, warmup, lr, min_ratio), lr / 10);
  EXPECT_DOUBLE_EQ(LearningRate(4, total, warmup, lr, min_ratio), lr * 5 / 10);
  EXPECT_DOUBLE_EQ(LearningRate(9, total, warmup, lr, min_ratio), lr);
  // Cosine from lr at the end of warm-up to lr · min_ratio at `total`, half-way at the middle.
  EXPECT_DOUBLE_EQ(LearningRate(10, total, warmup, lr, min_ratio), lr);
  EXPECT_NEAR(LearningRate(60, total, warmup, lr, min_ratio), (lr + lr * min_ratio) / 2, 1e-15);
  EXPECT_NEAR(LearningRate(35, total, warmup, lr, min_ratio),
              lr * min_ratio + 0.5 * (lr - lr * min_ratio) * (1 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_NEAR(LearningRate(110, total, warmup, lr, min_ratio), lr * min_ratio, 1e-15);
  EXPECT_NEAR(LearningRate(500, total, warmup, lr, min_ratio), lr * min_ratio, 1e-15);
  // No warm-up: the first step runs at the full rate.
  EXPECT_DOUBLE_EQ(LearningRate(0, total, 0, lr, min_ratio), lr);
}

TEST(AdamW, OffloadedMomentsStreamTileByTileAndMatchTheMomentsInMemoryBitForBit) {
  // Moments of 2 owned ranges over tensors of 3000 and 2500 elements on disk in tiles of 1024
  // floats: tiles cut tensors and ranges at every kind of place, and every element must follow
  // the in-memory optimizer exactly; FetchMoments and StoreMoments move them both ways.
  ParamLayout layout;
  layout.Add("w", {100, 30}, /*weight_decay=*/true);
  layout.Add("b", {2500}, /*weight_decay=*/false);
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  const std::vector<shard::Range> owned = {{100, 2000}, {2600, 2900}};
  offload::TieredStoreOptions options;
  options.dir =
      (std::filesystem::temp_directory_path() / ("weft_adam_offload_" + std::to_string(getpid())))
          .string();
  options.block_bytes = 4096;
  options.tile_blocks = 1;
  absl::StatusOr<std::unique_ptr<offload::TieredStore>> store =
      offload::TieredStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  AdamW memory(layout, settings, owned), disk(layout, settings, owned);
  ASSERT_TRUE(disk.Offload(store->get()).ok());
  EXPECT_TRUE(disk.offloaded());
  EXPECT_TRUE(disk.m().empty());
  std::vector<float> a(layout.total()), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.01f * static_cast<float>(i));
  b = a;
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> grads(layout.total());
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = std::cos(0.37f * static_cast<float>(i) + static_cast<float>(step));
    }
    std::vector<float*> pa, pb;
    std::vector<const float*> g;
    for (const shard::Range& r : owned) {
      pa.push_back(a.data() + r.begin);
      pb.push_back(b.data() + r.begin);
      g.push_back(grads.data() + r.begin);
    }
    ASSERT_TRUE(memory.Step(pa, g, 1e-2).ok());
    ASSERT_TRUE(disk.Step(pb, g, 1e-2).ok());
    ASSERT_EQ(a, b) << "step " << step;
  }
  EXPECT_GT((*store)->counters().bytes_read, 0u);
  ASSERT_TRUE(disk.FetchMoments().ok());
  EXPECT_EQ(disk.m(), memory.m());
  EXPECT_EQ(disk.v(), memory.v());
  ASSERT_TRUE(disk.StoreMoments().ok());
  EXPECT_TRUE(disk.v().empty());
}

}  // namespace
}  // namespace weft::trainer
