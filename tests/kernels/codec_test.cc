// Gradient-compression codecs (codec.h): the encoded bytes against a per-element reference at
// every SIMD level, the int8 error bound, the sign codec's scale, top-k's selection and tie-break,
// error feedback over many steps, non-finite inputs, and argument errors.
#include "weft/kernels/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace weft::testing {
namespace {

class CodecTest : public ::testing::Test {
 protected:
  void SetUp() override { initial_level_ = ActiveSimdLevel(); }
  void TearDown() override { SetSimdLevelForTesting(initial_level_); }

 private:
  SimdLevel initial_level_ = SimdLevel::kScalar;
};

bool Finite(float v) { return std::fabs(v) < INFINITY; }

float ScaleAt(const std::vector<uint8_t>& encoded, size_t block_index) {
  float scale;
  std::memcpy(&scale, encoded.data() + 4 * block_index, sizeof scale);
  return scale;
}

// The int8 encoding of codec.h, one element at a time.
std::vector<uint8_t> RefEncodeInt8(const std::vector<float>& x, size_t block) {
  const size_t n = x.size(), blocks = (n + block - 1) / block;
  std::vector<uint8_t> out(4 * blocks + n);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t end = std::min(n, (b + 1) * block);
    float m = 0.0f;
    for (size_t i = b * block; i < end; ++i) m = std::max(m, Finite(x[i]) ? std::fabs(x[i]) : 0.0f);
    float scale = m / 127.0f;
    if (std::isinf(127.0f * scale)) scale = std::nextafter(scale, 0.0f);
    std::memcpy(out.data() + 4 * b, &scale, 4);
    for (size_t i = b * block; i < end; ++i) {
      const float v = Finite(x[i]) ? x[i] : 0.0f;
      const float q = scale > 0 ? std::clamp(std::nearbyint(v / scale), -127.0f, 127.0f) : 0.0f;
      out[4 * blocks + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  return out;
}

// The sign encoding of codec.h: 16 fp64 partial sums combined pairwise, bits LSB first.
std::vector<uint8_t> RefEncodeSign(const std::vector<float>& x, size_t block) {
  const size_t n = x.size(), blocks = (n + block - 1) / block, block_bytes = (block + 7) / 8;
  std::vector<uint8_t> out(SignEncodedBytes(n, block));
  for (size_t b = 0; b < blocks; ++b) {
    const size_t len = std::min(block, n - b * block);
    double partial[16] = {};
    for (size_t j = 0; j < len; ++j) {
      const float v = x[b * block + j];
      partial[j % 16] += Finite(v) ? std::fabs(v) : 0.0;
      const bool bit = !Finite(v) || v >= 0.0f;
      out[4 * blocks + b * block_bytes + j / 8] |= static_cast<uint8_t>(bit << (j % 8));
    }
    for (size_t w = 8; w >= 1; w /= 2) {
      for (size_t j = 0; j < w; ++j) partial[j] += partial[j + w];
    }
    const float scale = static_cast<float>(partial[0] / static_cast<double>(len));
    std::memcpy(out.data() + 4 * b, &scale, 4);
  }
  return out;
}

// Normal values times `magnitude`, with zeros, negative zeros and repeats mixed in.
std::vector<float> RandomData(size_t n, double magnitude, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t pick = rng() % 16;
    x[i] = pick == 0 ? 0.0f : pick == 1 ? -0.0f : static_cast<float>(normal(rng) * magnitude);
    if (pick == 2 && i > 0) x[i] = -x[i - 1];
  }
  return x;
}

struct Case {
  size_t n, block;
  double magnitude;
};

// Lengths with and without tails, single elements, blocks of 1 and wider than n, and magnitudes
// from subnormal to near FLT_MAX.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (double magnitude : {1.0, 1e-3, 1e30, 3e37, 1e-38, 1e-42, 1e-44}) {
    for (auto [n, block] : std::initializer_list<std::pair<size_t, size_t>>{{1, 256},
                                                                            {7, 256},
                                                                            {256, 256},
                                                                            {1000, 256},
                                                                            {1000, 1},
                                                                            {999, 7},
                                                                            {4099, 16},
                                                                            {333, 33},
                                                                            {100, 1000},
                                                                            {4096, 4096}}) {
      cases.push_back(Case{n, block, magnitude});
    }
  }
  return cases;
}

std::vector<SimdLevel> SupportedLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : kAllLevels) {
    if (CpuSupports(level)) levels.push_back(level);
  }
  return levels;
}

TEST_F(CodecTest, EncodedSizesMatchTheLayout) {
  EXPECT_EQ(Int8EncodedBytes(1000, 256), 4 * 4 + 1000u);
  EXPECT_EQ(Int8EncodedBytes(1000), 4 * 4 + 1000u);
  EXPECT_EQ(Int8EncodedBytes(0, 256), 0u);
  EXPECT_EQ(Int8EncodedBytes(5, 0), 0u);
  EXPECT_EQ(SignEncodedBytes(1000, 256), 4 * 4 + 3 * 32 + 29u);
  EXPECT_EQ(SignEncodedBytes(250, 100), 4 * 3 + 2 * 13 + 7u);
  EXPECT_EQ(SignEncodedBytes(1, 1), 5u);
  EXPECT_EQ(SignEncodedBytes(5, 0), 0u);
  EXPECT_EQ(TopKEncodedBytes(5), 40u);
}

TEST_F(CodecTest, Int8MatchesTheReferenceAndTheBoundAtEveryLevel) {
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    uint32_t seed = 1;
    for (const Case& c : Cases()) {
      const std::vector<float> x = RandomData(c.n, c.magnitude, seed++);
      std::vector<uint8_t> encoded(Int8EncodedBytes(c.n, c.block));
      ASSERT_EQ(*EncodeInt8(x.data(), c.n, encoded.data(), c.block), 0u);
      ASSERT_EQ(encoded, RefEncodeInt8(x, c.block)) << Name(level) << " n " << c.n;
      std::vector<float> decoded(c.n);
      ASSERT_TRUE(DecodeInt8(encoded.data(), c.n, decoded.data(), c.block).ok());
      for (size_t i = 0; i < c.n; ++i) {
        const double scale = ScaleAt(encoded, i / c.block);
        const double bound = scale * (0.5 + std::ldexp(1.0, -16)) + std::ldexp(1.0, -142);
        ASSERT_LE(std::fabs(static_cast<double>(x[i]) - decoded[i]), bound)
            << Name(level) << " n " << c.n << " i " << i << " x " << x[i];
      }
    }
  }
}

TEST_F(CodecTest, Int8HandlesExtremeBlocks) {
  // FLT_MAX (whose 127 * scale would overflow), an all-zero block, and a block whose scale
  // underflows to zero, each decoding finite and within the bound.
  const std::vector<float> x = {FLT_MAX,
                                -FLT_MAX,
                                1.0f,
                                0.0f,
                                0.0f,
                                -0.0f,
                                0.0f,
                                0.0f,
                                std::ldexp(1.0f, -147),
                                -std::ldexp(1.0f, -149)};
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    std::vector<uint8_t> encoded(Int8EncodedBytes(x.size(), 3));
    ASSERT_EQ(*EncodeInt8(x.data(), x.size(), encoded.data(), 3), 0u);
    EXPECT_EQ(encoded, RefEncodeInt8(x, 3));
    EXPECT_EQ(ScaleAt(encoded, 1), 0.0f);
    std::vector<float> decoded(x.size());
    ASSERT_TRUE(DecodeInt8(encoded.data(), x.size(), decoded.data(), 3).ok());
    EXPECT_TRUE(std::isfinite(decoded[0]) && decoded[0] > 0.99f * FLT_MAX) << decoded[0];
    EXPECT_EQ(decoded[1], -decoded[0]);
    for (size_t i = 3; i < x.size(); ++i) EXPECT_LE(std::fabs(x[i] - decoded[i]), 0x1p-142f) << i;
  }
}

TEST_F(CodecTest, SignMatchesTheReferenceAtEveryLevel) {
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    uint32_t seed = 100;
    for (const Case& c : Cases()) {
      const std::vector<float> x = RandomData(c.n, c.magnitude, seed++);
      std::vector<uint8_t> encoded(SignEncodedBytes(c.n, c.block));
      ASSERT_EQ(*EncodeSign(x.data(), c.n, encoded.data(), c.block), 0u);
      ASSERT_EQ(encoded, RefEncodeSign(x, c.block)) << Name(level) << " n " << c.n;
      std::vector<float> decoded(c.n);
      ASSERT_TRUE(DecodeSign(encoded.data(), c.n, decoded.data(), c.block).ok());
      for (size_t i = 0; i < c.n; ++i) {
        const float scale = ScaleAt(encoded, i / c.block);
        ASSERT_TRUE(SameBits(decoded[i], x[i] >= 0.0f ? scale : -scale)) << i;
      }
    }
  }
  // The scale is the block's mean |x|, finite even where the fp32 sum would overflow.
  const std::vector<float> huge = {FLT_MAX, -FLT_MAX, FLT_MAX, 0.0f};
  std::vector<uint8_t> encoded(SignEncodedBytes(4, 4));
  ASSERT_TRUE(EncodeSign(huge.data(), 4, encoded.data(), 4).ok());
  EXPECT_EQ(ScaleAt(encoded, 0), static_cast<float>(0.75 * FLT_MAX));
  EXPECT_EQ(encoded[4], 0b1101);
}

// Runs `codec` (an encoder with or without feedback, then a decoder) at every level and checks
// that the bytes, the decoded values and the error match the scalar level's bit for bit.
using EncodeFn = std::function<void(const float*, float*, size_t, uint8_t*, size_t)>;
using DecodeFn = std::function<absl::Status(const uint8_t*, size_t, float*, size_t)>;
void ExpectLevelsIdentical(const EncodeFn& encode, const DecodeFn& decode) {
  uint32_t seed = 500;
  for (const Case& c : Cases()) {
    std::vector<uint8_t> first_bytes;
    std::vector<float> first_error, first_decoded;
    for (SimdLevel level : SupportedLevels()) {
      SetSimdLevelForTesting(level);
      const std::vector<float> x = RandomData(c.n, c.magnitude, seed);
      std::vector<float> error = RandomData(c.n, c.magnitude / 10, seed + 1);
      // Room for either codec at any block size: at most a scale and a byte per element.
      std::vector<uint8_t> bytes(5 * c.n);
      encode(x.data(), error.data(), c.n, bytes.data(), c.block);
      std::vector<float> decoded = RandomData(c.n, 1.0, seed + 2);
      ASSERT_TRUE(decode(bytes.data(), c.n, decoded.data(), c.block).ok());
      if (level == SimdLevel::kScalar) {
        first_bytes = bytes, first_error = error, first_decoded = decoded;
        continue;
      }
      ASSERT_EQ(bytes, first_bytes) << Name(level) << " n " << c.n << " block " << c.block;
      for (size_t i = 0; i < c.n; ++i) {
        ASSERT_TRUE(SameBits(error[i], first_error[i])) << Name(level) << " error " << i;
        ASSERT_TRUE(SameBits(decoded[i], first_decoded[i])) << Name(level) << " decoded " << i;
      }
    }
    seed += 3;
  }
}

TEST_F(CodecTest, LevelsAreBitIdenticalToScalar) {
  ExpectLevelsIdentical(
      [](const float* x, float* e, size_t n, uint8_t* out, size_t block) {
        ASSERT_TRUE(EncodeInt8WithFeedback(x, e, n, out, block).ok());
      },
      DecodeAddInt8);
  ExpectLevelsIdentical(
      [](const float* x, float* e, size_t n, uint8_t* out, size_t block) {
        ASSERT_TRUE(EncodeSignWithFeedback(x, e, n, out, block).ok());
      },
      DecodeAddSign);
  ExpectLevelsIdentical([](const float* x, float*, size_t n, uint8_t* out,
                           size_t block) { ASSERT_TRUE(EncodeSign(x, n, out, block).ok()); },
                        DecodeSign);
}

TEST_F(CodecTest, NonFiniteInputsAreCountedAndSentAsZero) {
  const std::vector<float> x = {1.0f, NAN, -2.0f, INFINITY, -INFINITY, 0.5f};
  const std::vector<float> as_zero = {1.0f, 0.0f, -2.0f, 0.0f, 0.0f, 0.5f};
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    std::vector<uint8_t> int8(Int8EncodedBytes(6, 4)), sign(SignEncodedBytes(6, 4));
    EXPECT_EQ(*EncodeInt8(x.data(), 6, int8.data(), 4), 3u);
    EXPECT_EQ(int8, RefEncodeInt8(as_zero, 4));
    EXPECT_EQ(*EncodeSign(x.data(), 6, sign.data(), 4), 3u);
    EXPECT_EQ(sign, RefEncodeSign(as_zero, 4));
    // With feedback the error stays finite: the non-finite element's residual is 0 - decode.
    std::vector<float> error(6, 0.0f), decoded(6);
    EXPECT_EQ(*EncodeInt8WithFeedback(x.data(), error.data(), 6, int8.data(), 4), 3u);
    ASSERT_TRUE(DecodeInt8(int8.data(), 6, decoded.data(), 4).ok());
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(error[i], as_zero[i] - decoded[i]) << i;
  }
  std::vector<TopKEntry> top(2);
  EXPECT_EQ(*EncodeTopK(x.data(), 6, 2, top.data()), 3u);
  EXPECT_EQ(top[0].index, 0u);
  EXPECT_EQ(top[1].index, 2u);
}

// The reference top-k: indices by decreasing |x| (non-finite as 0), then increasing index.
std::vector<TopKEntry> RefTopK(const std::vector<float>& x, size_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  auto magnitude = [&](uint32_t i) { return Finite(x[i]) ? std::fabs(x[i]) : 0.0f; };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return magnitude(a) > magnitude(b); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  std::vector<TopKEntry> entries;
  for (uint32_t i : order) entries.push_back({i, Finite(x[i]) ? x[i] : 0.0f});
  return entries;
}

TEST_F(CodecTest, TopKPicksTheLargestWithLowerIndicesWinningTies) {
  std::mt19937 rng(7);
  for (size_t n : {1, 2, 10, 1000, 100000}) {
    // Few distinct magnitudes (many ties), spread over many exponents, plus random floats.
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) {
      const float sign = rng() % 2 == 0 ? 1.0f : -1.0f;
      x[i] = i % 3 == 0 ? sign * static_cast<float>(rng() % 5)
                        : sign * std::ldexp(1.0f + static_cast<float>(rng() % 8) / 8,
                                            static_cast<int>(rng() % 60) - 30);
    }
    for (size_t k : {size_t{0}, size_t{1}, n / 3, n / 2, n - 1, n}) {
      std::vector<TopKEntry> top(k);
      ASSERT_EQ(*EncodeTopK(x.data(), n, k, top.data()), 0u);
      const std::vector<TopKEntry> expected = RefTopK(x, k);
      for (size_t j = 0; j < k; ++j) {
        ASSERT_EQ(top[j].index, expected[j].index) << "n " << n << " k " << k << " j " << j;
        ASSERT_TRUE(SameBits(top[j].value, expected[j].value)) << j;
      }
      std::vector<float> dense(n, 5.0f);
      ASSERT_TRUE(DecodeTopK(top.data(), k, n, dense.data()).ok());
      std::vector<float> added(n, 1.0f);
      ASSERT_TRUE(DecodeAddTopK(top.data(), k, n, added.data()).ok());
      size_t next = 0;
      for (size_t i = 0; i < n; ++i) {
        const bool sent = next < k && top[next].index == i;
        ASSERT_EQ(dense[i], sent ? top[next].value : 0.0f) << i;
        ASSERT_EQ(added[i], sent ? 1.0f + top[next].value : 1.0f) << i;
        next += sent ? 1 : 0;
      }
    }
  }
}

// Steps `encode_decode` (which encodes x with feedback into `error` and returns the decoded
// values) 200 times over fresh gradients, and checks after every step that the gradients summed
// so far minus the decoded values summed so far equal the error, up to the fp32 rounding of the
// two feedback operations, and that the error stays within `error_bound` times max |x|.
void ExpectFeedbackTracksTheSum(
    const std::function<std::vector<float>(const std::vector<float>&, std::vector<float>&)>&
        encode_decode,
    double error_bound) {
  constexpr size_t kN = 3000;
  std::vector<double> sent(kN, 0.0), truth(kN, 0.0), rounding(kN, 0.0);
  std::vector<float> error(kN, 0.0f);
  double max_x = 0.0;
  for (uint32_t step = 0; step < 200; ++step) {
    const std::vector<float> x = RandomData(kN, 1.0 + step % 3, 1000 + step);
    const std::vector<float> before = error;
    const std::vector<float> decoded = encode_decode(x, error);
    for (size_t i = 0; i < kN; ++i) {
      max_x = std::max(max_x, std::fabs(static_cast<double>(x[i])));
      truth[i] += x[i];
      sent[i] += decoded[i];
      // fl(x + e) and fl(v - d) each round by at most 2^-24 of their result.
      const double v = static_cast<double>(x[i]) + before[i];
      rounding[i] += std::ldexp(std::fabs(v) + std::fabs(error[i]), -23);
      ASSERT_LE(std::fabs(truth[i] - sent[i] - error[i]), rounding[i])
          << "step " << step << " element " << i;
      ASSERT_LE(std::fabs(error[i]), error_bound * max_x) << "step " << step << " element " << i;
    }
  }
}

TEST_F(CodecTest, ErrorFeedbackKeepsWhatWasNotSent) {
  ExpectFeedbackTracksTheSum(
      [](const std::vector<float>& x, std::vector<float>& error) {
        std::vector<uint8_t> bytes(Int8EncodedBytes(x.size()));
        EXPECT_TRUE(EncodeInt8WithFeedback(x.data(), error.data(), x.size(), bytes.data()).ok());
        std::vector<float> decoded(x.size());
        EXPECT_TRUE(DecodeInt8(bytes.data(), x.size(), decoded.data()).ok());
        return decoded;
      },
      0.01);
  ExpectFeedbackTracksTheSum(
      [](const std::vector<float>& x, std::vector<float>& error) {
        std::vector<uint8_t> bytes(SignEncodedBytes(x.size(), 64));
        EXPECT_TRUE(
            EncodeSignWithFeedback(x.data(), error.data(), x.size(), bytes.data(), 64).ok());
        std::vector<float> decoded(x.size(), 0.0f);
        EXPECT_TRUE(DecodeAddSign(bytes.data(), x.size(), decoded.data(), 64).ok());
        return decoded;
      },
      4.0);
  ExpectFeedbackTracksTheSum(
      [](const std::vector<float>& x, std::vector<float>& error) {
        const size_t k = x.size() / 10;
        std::vector<TopKEntry> top(k);
        EXPECT_TRUE(EncodeTopKWithFeedback(x.data(), error.data(), x.size(), k, top.data()).ok());
        std::vector<float> decoded(x.size());
        EXPECT_TRUE(DecodeTopK(top.data(), k, x.size(), decoded.data()).ok());
        return decoded;
      },
      8.0);
}

TEST_F(CodecTest, BadArgumentsAreReportedAndWriteNothing) {
  std::vector<float> x(10, 1.0f), out(10, 3.0f);
  std::vector<uint8_t> bytes(100, 0xAB);
  const absl::StatusOr<size_t> zero_block = EncodeInt8(x.data(), 10, bytes.data(), 0);
  EXPECT_EQ(zero_block.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero_block.status().message().find("EncodeInt8: block is 0"), std::string::npos);
  EXPECT_FALSE(DecodeSign(bytes.data(), 10, out.data(), 0).ok());
  EXPECT_FALSE(EncodeSignWithFeedback(x.data(), nullptr, 10, bytes.data()).ok());
  EXPECT_EQ(bytes, std::vector<uint8_t>(100, 0xAB));
  std::vector<TopKEntry> top(11);
  const absl::StatusOr<size_t> too_many = EncodeTopK(x.data(), 10, 11, top.data());
  EXPECT_NE(too_many.status().message().find("k (11) exceeds n (10)"), std::string::npos);
  const std::vector<TopKEntry> bad = {{2, 1.0f}, {10, 1.0f}};
  const absl::Status status = DecodeAddTopK(bad.data(), 2, 10, out.data());
  EXPECT_NE(status.message().find("entry 1 has index 10"), std::string::npos) << status;
  EXPECT_FALSE(DecodeTopK(bad.data(), 2, 10, out.data()).ok());
  EXPECT_EQ(out, std::vector<float>(10, 3.0f));
  EXPECT_EQ(*EncodeInt8(nullptr, 0, nullptr), 0u);
  EXPECT_EQ(*EncodeTopK(nullptr, 0, 0, nullptr), 0u);
}

}  // namespace
}  // namespace weft::testing
