// AdamW and AdamWWithBFloat16Copy against the trainer's loop (written out below), at every SIMD
// level the CPU has, bit for bit: odd lengths, every misalignment of each array, decay on and
// off, several consecutive steps, and extreme magnitudes. Arrays sit between sentinels, so a
// head or tail that writes past its elements is caught.
#include "weft/kernels/adam.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.h"
#include "weft/kernels/convert.h"
#include "weft/kernels/reduce.h"

namespace weft {
namespace {

using testing::CpuSupports;
using testing::kAllLevels;
using testing::RefFloatToBFloat16;
using testing::SameBits;

struct Settings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// AdamW::Step of trainer/optimizer.cc for one segment, as the trainer writes it: the definition
// the kernels must reproduce bit for bit.
void TrainerStep(const Settings& settings, int64_t step, double lr, bool decays, float* p,
                 const float* g, float* ms, float* vs, size_t count) {
  const float b1 = static_cast<float>(settings.beta1);
  const float b2 = static_cast<float>(settings.beta2);
  const float eps = static_cast<float>(settings.eps);
  const float correction1 = static_cast<float>(1.0 / (1.0 - std::pow(settings.beta1, step)));
  const float correction2 = static_cast<float>(1.0 / (1.0 - std::pow(settings.beta2, step)));
  const float rate = static_cast<float>(lr);
  const float decay = decays ? static_cast<float>(lr * settings.weight_decay) : 0.0f;
  for (size_t i = 0; i < count; ++i) {
    ms[i] = b1 * ms[i] + (1.0f - b1) * g[i];
    vs[i] = b2 * vs[i] + (1.0f - b2) * g[i] * g[i];
    const float m_hat = ms[i] * correction1;
    const float v_hat = vs[i] * correction2;
    p[i] -= rate * m_hat / (std::sqrt(v_hat) + eps) + decay * p[i];
  }
}

AdamWStep StepOf(const Settings& settings, int64_t step, double lr, bool decays) {
  return MakeAdamWStep(settings.beta1, settings.beta2, settings.eps, lr,
                       decays ? settings.weight_decay : 0.0, step);
}

// `values` placed `offset` elements past a 64-byte boundary, with sentinels on both sides.
template <typename T>
class Guarded {
 public:
  Guarded(const std::vector<T>& values, size_t offset) : size_(values.size()) {
    storage_.assign(values.size() + offset + 2 * kGuard + 64 / sizeof(T), Sentinel());
    size_t base = 0;
    while (reinterpret_cast<uintptr_t>(storage_.data() + base) % 64 != 0) ++base;
    begin_ = base + kGuard + offset;
    for (size_t i = 0; i < size_; ++i) storage_[begin_ + i] = values[i];
  }

  T* data() { return storage_.data() + begin_; }
  std::vector<T> values() const {
    return std::vector<T>(storage_.begin() + begin_, storage_.begin() + begin_ + size_);
  }
  // Whether every element outside the array still holds the sentinel.
  bool GuardsIntact() const {
    for (size_t i = 0; i < storage_.size(); ++i) {
      if ((i < begin_ || i >= begin_ + size_) && !SameBits(storage_[i], Sentinel())) return false;
    }
    return true;
  }

 private:
  static constexpr size_t kGuard = 16;
  static T Sentinel() {
    if constexpr (sizeof(T) == sizeof(uint32_t)) {
      return std::bit_cast<T>(uint32_t{0x5A5A5A5A});
    } else {
      return T{0x5A5A};
    }
  }

  size_t size_;
  size_t begin_ = 0;
  std::vector<T> storage_;
};

// Equal bits, or NaN on both sides (adam.h leaves the payload of a NaN result unspecified).
::testing::AssertionResult SameFloats(const std::vector<float>& expected,
                                      const std::vector<float>& actual, const std::string& what) {
  if (expected.size() != actual.size()) return ::testing::AssertionFailure() << what << ": size";
  for (size_t i = 0; i < expected.size(); ++i) {
    const bool both_nan = std::isnan(expected[i]) && std::isnan(actual[i]);
    if (!both_nan && !SameBits(expected[i], actual[i])) {
      return ::testing::AssertionFailure()
             << what << ": element " << i << " of " << expected.size() << " is " << actual[i]
             << " (0x" << std::hex << std::bit_cast<uint32_t>(actual[i]) << "), expected "
             << expected[i] << " (0x" << std::bit_cast<uint32_t>(expected[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Magnitudes 2^lo .. 2^hi, either sign, never zero.
std::vector<float> Random(std::mt19937& rng, size_t count, int lo, int hi) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(lo, hi);
  std::vector<float> values(count);
  for (float& x : values) {
    x = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 == 0 ? 1.0f : -1.0f);
  }
  return values;
}

// The state of one tensor under optimisation: parameters and both moments.
struct State {
  std::vector<float> p, m, v;
};

State RandomState(std::mt19937& rng, size_t count) {
  State s{Random(rng, count, -4, 2), Random(rng, count, -14, -6), Random(rng, count, -24, -8)};
  for (float& x : s.v) x = std::fabs(x);
  return s;
}

// A layout of the four (or five) arrays: how far past a 64-byte boundary each one starts.
struct Offsets {
  size_t p, g, m, v, bf16;
};

// All aligned; all equally misaligned; and each misaligned its own way.
std::vector<Offsets> OffsetsFor(size_t count) {
  const size_t k = count % 16;
  return {{0, 0, 0, 0, 0},
          {k, k, k, k, k},
          {k, (k + 3) % 16, (k * 5 + 1) % 16, (k * 7 + 2) % 16, (k + 9) % 32}};
}

constexpr size_t kCounts[] = {0,  1,  2,  3,  7,  8,   9,   15,   16,  17,
                              31, 33, 63, 64, 65, 100, 257, 1000, 4099};

// Runs `steps` updates with fresh gradients at the active level, through AdamW or (with_copy)
// AdamWWithBFloat16Copy, and checks each against TrainerStep; the copy must equal
// FloatToBFloat16 of the updated parameters.
void CheckAgainstTrainer(const std::string& where, size_t count, const Offsets& at, bool decays,
                         bool with_copy, uint32_t seed) {
  std::mt19937 rng(seed);
  const Settings settings;
  State expected = RandomState(rng, count);
  Guarded<float> p(expected.p, at.p), m(expected.m, at.m), v(expected.v, at.v);
  Guarded<uint16_t> bf16(std::vector<uint16_t>(count), at.bf16);
  for (int64_t step = 1; step <= 4; ++step) {
    const double lr = 1e-3 / static_cast<double>(step);
    const std::vector<float> grads = Random(rng, count, -12, 3);
    Guarded<float> g(grads, at.g);
    TrainerStep(settings, step, lr, decays, expected.p.data(), grads.data(), expected.m.data(),
                expected.v.data(), count);
    const AdamWStep s = StepOf(settings, step, lr, decays);
    if (with_copy) {
      AdamWWithBFloat16Copy(s, p.data(), g.data(), m.data(), v.data(), bf16.data(), count);
    } else {
      AdamW(s, p.data(), g.data(), m.data(), v.data(), count);
    }
    const std::string what = where + " step " + std::to_string(step);
    ASSERT_TRUE(SameFloats(expected.p, p.values(), what + " param"));
    ASSERT_TRUE(SameFloats(expected.m, m.values(), what + " m"));
    ASSERT_TRUE(SameFloats(expected.v, v.values(), what + " v"));
    ASSERT_TRUE(p.GuardsIntact() && m.GuardsIntact() && v.GuardsIntact() && g.GuardsIntact())
        << what << ": wrote outside the arrays";
    if (with_copy) {
      const std::vector<uint16_t> copy = bf16.values();
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(copy[i], FloatToBFloat16(expected.p[i])) << what << " bf16 element " << i;
      }
      ASSERT_TRUE(bf16.GuardsIntact()) << what << ": wrote outside the bf16 copy";
    }
  }
}

class AdamTest : public ::testing::Test {
 protected:
  void SetUp() override { initial_level_ = ActiveSimdLevel(); }
  void TearDown() override { SetSimdLevelForTesting(initial_level_); }

  // Runs CheckAgainstTrainer over every level, length, layout and decay setting.
  static void CheckEverything(bool with_copy) {
    for (SimdLevel level : kAllLevels) {
      if (!CpuSupports(level)) continue;
      SetSimdLevelForTesting(level);
      for (size_t count : kCounts) {
        const std::vector<Offsets> layouts = OffsetsFor(count);
        for (size_t l = 0; l < layouts.size(); ++l) {
          for (bool decays : {false, true}) {
            const std::string where = std::string(Name(level)) + " count " + std::to_string(count) +
                                      " layout " + std::to_string(l) +
                                      (decays ? " decay" : " no decay");
            CheckAgainstTrainer(where, count, layouts[l], decays, with_copy,
                                static_cast<uint32_t>(count * 7 + l));
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }

 private:
  SimdLevel initial_level_ = SimdLevel::kScalar;
};

TEST_F(AdamTest, MakeAdamWStepMatchesTheTrainersDerivation) {
  const Settings settings_list[] = {
      {0.9, 0.95, 1e-8, 0.1}, {0.9, 0.999, 1e-6, 0.01}, {0.8, 0.99, 1e-5, 0.3}};
  for (const Settings& settings : settings_list) {
    for (int64_t step : {1, 2, 3, 10, 1000, 123456}) {
      const double lr = 3e-4 / static_cast<double>(step);
      const AdamWStep s = StepOf(settings, step, lr, true);
      EXPECT_TRUE(SameBits(s.beta1, static_cast<float>(settings.beta1)));
      EXPECT_TRUE(SameBits(s.beta2, static_cast<float>(settings.beta2)));
      EXPECT_TRUE(SameBits(s.eps, static_cast<float>(settings.eps)));
      EXPECT_TRUE(SameBits(s.correction1,
                           static_cast<float>(1.0 / (1.0 - std::pow(settings.beta1, step)))));
      EXPECT_TRUE(SameBits(s.correction2,
                           static_cast<float>(1.0 / (1.0 - std::pow(settings.beta2, step)))));
      EXPECT_TRUE(SameBits(s.lr, static_cast<float>(lr)));
      EXPECT_TRUE(SameBits(s.decay, static_cast<float>(lr * settings.weight_decay)));
      // The trainer's constant for a tensor without decay is +0.
      EXPECT_TRUE(SameBits(StepOf(settings, step, lr, false).decay, 0.0f));
    }
  }
  // Step 1 corrects by exactly 1 / (1 - beta).
  EXPECT_EQ(MakeAdamWStep(0.5, 0.75, 1e-8, 1e-3, 0.1, 1).correction1, 2.0f);
  EXPECT_EQ(MakeAdamWStep(0.5, 0.75, 1e-8, 1e-3, 0.1, 1).correction2, 4.0f);
}

TEST_F(AdamTest, MatchesTheTrainerLoopAtEveryLevel) { CheckEverything(/*with_copy=*/false); }

TEST_F(AdamTest, BFloat16CopyMatchesTheTrainerLoopAndFloatToBFloat16AtEveryLevel) {
  CheckEverything(/*with_copy=*/true);
}

// Gradients from 2^-80 (whose squares underflow) to 2^70 (whose squares overflow), zeros of
// both signs, subnormal moments and infinities: every level must agree with the scalar one.
TEST_F(AdamTest, ExtremeValuesAgreeWithTheScalarLevel) {
  constexpr size_t kCount = 1021;
  std::mt19937 rng(99);
  const std::vector<float> grad_values = Random(rng, kCount, -80, 70);
  State start = RandomState(rng, kCount);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::min() / 8,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::max()};
  for (size_t i = 0; i < kCount; i += 5) {
    const float special = specials[(i / 5) % std::size(specials)];
    ((i / 5) % 3 == 0 ? start.p : (i / 5) % 3 == 1 ? start.m : start.v)[i] = special;
  }
  for (float& x : start.v) x = std::fabs(x);
  Guarded<float> g(grad_values, 3);
  const AdamWStep s = MakeAdamWStep(0.9, 0.95, 1e-8, 1e-2, 0.1, 2);

  std::vector<float> expected[3];
  std::vector<uint16_t> expected_copy;
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    Guarded<float> p(start.p, 1), m(start.m, 2), v(start.v, 5);
    Guarded<uint16_t> bf16(std::vector<uint16_t>(kCount), 7);
    AdamWWithBFloat16Copy(s, p.data(), g.data(), m.data(), v.data(), bf16.data(), kCount);
    if (level == SimdLevel::kScalar) {
      expected[0] = p.values();
      expected[1] = m.values();
      expected[2] = v.values();
      expected_copy = bf16.values();
      continue;
    }
    const std::string where = Name(level);
    EXPECT_TRUE(SameFloats(expected[0], p.values(), where + " param"));
    EXPECT_TRUE(SameFloats(expected[1], m.values(), where + " m"));
    EXPECT_TRUE(SameFloats(expected[2], v.values(), where + " v"));
    // NaN payloads may differ (adam.h), so the copy is checked against the level's own params.
    const std::vector<float> params = p.values();
    const std::vector<uint16_t> copy = bf16.values();
    for (size_t i = 0; i < kCount; ++i) {
      if (!std::isnan(params[i])) {
        EXPECT_EQ(copy[i], expected_copy[i]) << where << " " << i;
      }
      EXPECT_EQ(copy[i], FloatToBFloat16(params[i])) << where << " " << i;
    }
  }
}

// With lr = 0 and no decay, finite non-zero parameters stay as they are, so the copy can be fed
// exact halfway cases, signed zeros, subnormals and NaNs of chosen payloads.
TEST_F(AdamTest, BFloat16CopyRoundsHalfwayCasesToEvenAndQuietsNaNs) {
  const std::vector<float> params = {
      std::bit_cast<float>(0x3F808000u),  // halfway, even below: rounds down to 0x3F80
      std::bit_cast<float>(0x3F818000u),  // halfway, odd below: rounds up to 0x3F82
      std::bit_cast<float>(0x3F808001u),  // above halfway: up
      std::bit_cast<float>(0xBF817FFFu),  // below halfway, negative: down in magnitude
      std::bit_cast<float>(0x7F7FFFFFu),  // the largest float rounds up to infinity
      std::bit_cast<float>(0x00008000u),  // subnormal halfway: to even (zero)
      std::bit_cast<float>(0x7FC12345u),  // quiet NaN
      std::bit_cast<float>(0xFFA00001u),  // signalling NaN: the arithmetic quiets it
      std::bit_cast<float>(0x7FC18000u),  // NaN with a halfway low half: truncated, not rounded
      std::bit_cast<float>(0xFFFFFFFFu),  // NaN that rounding would carry into the sign: truncated
      -std::numeric_limits<float>::min(), 1.0f};
  const std::vector<uint16_t> expected = {0x3F80, 0x3F82, 0x3F81, 0xBF81, 0x7F80, 0x0000,
                                          0x7FC1, 0xFFE0, 0x7FC1, 0xFFFF, 0x8080, 0x3F80};
  const size_t count = params.size();
  const AdamWStep s = MakeAdamWStep(0.9, 0.95, 1e-8, 0.0, 0.0, 1);
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    for (size_t offset : {0, 3}) {
      Guarded<float> p(params, offset), m(std::vector<float>(count, 0.0f), offset);
      Guarded<float> v(std::vector<float>(count, 1.0f), offset);
      const std::vector<float> grads(count, 0.5f);
      Guarded<uint16_t> bf16(std::vector<uint16_t>(count), offset);
      AdamWWithBFloat16Copy(s, p.data(), grads.data(), m.data(), v.data(), bf16.data(), count);
      const std::vector<float> updated = p.values();
      const std::vector<uint16_t> copy = bf16.values();
      for (size_t i = 0; i < count; ++i) {
        const std::string where = std::string(Name(level)) + " element " + std::to_string(i);
        if (!std::isnan(params[i])) {
          EXPECT_TRUE(SameBits(updated[i], params[i])) << where;
        }
        EXPECT_EQ(copy[i], expected[i]) << where;
        EXPECT_EQ(copy[i], RefFloatToBFloat16(updated[i])) << where;
      }
      EXPECT_TRUE(bf16.GuardsIntact()) << Name(level);
    }
  }
}

TEST_F(AdamTest, ZeroLengthTouchesNothing) {
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    Guarded<float> p({}, 5), g({}, 5), m({}, 5), v({}, 5);
    Guarded<uint16_t> bf16({}, 5);
    const AdamWStep s = MakeAdamWStep(0.9, 0.95, 1e-8, 1e-3, 0.1, 1);
    AdamW(s, p.data(), g.data(), m.data(), v.data(), 0);
    AdamWWithBFloat16Copy(s, p.data(), g.data(), m.data(), v.data(), bf16.data(), 0);
    EXPECT_TRUE(p.GuardsIntact() && g.GuardsIntact() && m.GuardsIntact() && v.GuardsIntact() &&
                bf16.GuardsIntact())
        << Name(level);
  }
}

}  // namespace
}  // namespace weft
