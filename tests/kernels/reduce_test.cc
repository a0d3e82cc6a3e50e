// ReduceInto / Reduce / ReduceMany against the reference, for every type, operator and SIMD
// level, on counts that exercise the unrolled loop, the single-register loop and the tail.
#include "weft/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernel_table.h"
#include "reference.h"

namespace weft::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 63, 1000, 4097};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
// Extra elements after each output buffer; a kernel that writes past `count` changes them.
constexpr size_t kGuard = 80;
constexpr unsigned char kGuardByte = 0xA5;

template <DataType kType>
using Storage = typename RefTraits<kType>::Storage;

template <typename S>
std::string Bits(S value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(S));
  char text[32];
  std::snprintf(text, sizeof(text), "0x%0*" PRIx64, static_cast<int>(2 * sizeof(S)), bits);
  return text;
}

// Random elements: integers and 16-bit floats as uniform bit patterns (every class of value
// appears); fp32/fp64 mostly as moderate values, so that sums and products stay interesting,
// and a quarter as raw bit patterns (NaNs, infinities, subnormals, huge values).
template <DataType kType>
std::vector<Storage<kType>> RandomData(std::mt19937_64& rng, size_t count) {
  using S = Storage<kType>;
  std::vector<S> data(count);
  for (auto& x : data) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<S>) {
      if (bits % 4 == 0) {
        std::memcpy(&x, &bits, sizeof(S));
      } else {
        const double mantissa = static_cast<double>(bits >> 11) * 0x1p-53;
        const int exponent = static_cast<int>((bits >> 2) % 41) - 20;
        x = static_cast<S>(std::ldexp((bits & 2) != 0 ? -mantissa : mantissa, exponent));
      }
    } else {
      std::memcpy(&x, &bits, sizeof(S));
    }
  }
  return data;
}

// With two NaN operands an IEEE sum or product may return either payload, and the compiler may
// commute the operands, so the arithmetic operators are checked on data where each element
// position holds at most one NaN. Min and max are fully determined and keep every NaN.
template <DataType kType>
void KeepOneNanPerPosition(ReduceOp op, std::vector<std::vector<Storage<kType>>>& sources) {
  if constexpr (std::is_floating_point_v<typename RefTraits<kType>::Compute>) {
    if (op == ReduceOp::kMin || op == ReduceOp::kMax) return;
    for (size_t i = 0; i < sources[0].size(); ++i) {
      bool seen = false;
      for (auto& source : sources) {
        if (!std::isnan(RefLoad<kType>(source[i]))) continue;
        if (seen) source[i] = RefStore<kType>(1);
        seen = true;
      }
    }
  }
}

template <DataType kType>
std::vector<Storage<kType>> Expected(ReduceOp op,
                                     const std::vector<std::vector<Storage<kType>>>& sources) {
  std::vector<Storage<kType>> expected(sources[0].size());
  for (size_t i = 0; i < expected.size(); ++i) {
    auto acc = RefLoad<kType>(sources[0][i]);
    for (size_t k = 1; k < sources.size(); ++k) {
      acc = RefCombine(op, acc, RefLoad<kType>(sources[k][i]));
    }
    // A single source is copied, not converted: signalling NaNs stay as they are.
    expected[i] = sources.size() == 1 ? sources[0][i] : RefStore<kType>(acc);
  }
  return expected;
}

// A buffer of `count` elements between guard bytes. The first element lies `offset` bytes past a
// 64-byte boundary, which fixes the head a kernel handles before its first aligned block.
template <typename S>
class Guarded {
 public:
  explicit Guarded(const std::vector<S>& init, size_t offset = 0) : count_(init.size()) {
    bytes_.assign(64 + offset + count_ * sizeof(S) + kGuard, kGuardByte);
    lead_ = (64 - reinterpret_cast<uintptr_t>(bytes_.data()) % 64) % 64 + offset;
    if (count_ != 0) std::memcpy(bytes_.data() + lead_, init.data(), count_ * sizeof(S));
  }
  void* data() { return bytes_.data() + lead_; }

  // Expects the contents to equal `expected` bit for bit and the guard to be intact.
  void Check(const std::vector<S>& expected, const std::string& what) const {
    for (size_t i = 0; i < count_; ++i) {
      S actual;
      std::memcpy(&actual, bytes_.data() + lead_ + i * sizeof(S), sizeof(S));
      if (!SameBits(actual, expected[i])) {
        ADD_FAILURE() << what << ": element " << i << " of " << count_ << " is " << Bits(actual)
                      << ", expected " << Bits(expected[i]);
        return;
      }
    }
    for (size_t i = 0; i < bytes_.size(); ++i) {
      if (i == lead_) i += count_ * sizeof(S);
      if (i < bytes_.size() && bytes_[i] != kGuardByte) {
        ADD_FAILURE() << what << ": wrote outside the " << count_ << " elements";
        return;
      }
    }
  }

 private:
  size_t count_;
  size_t lead_ = 0;
  std::vector<unsigned char> bytes_;
};

const kernels_internal::KernelTable& TableOf(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return kernels_internal::kAvx512Kernels;
    case SimdLevel::kAvx2:
      return kernels_internal::kAvx2Kernels;
    case SimdLevel::kScalar:
      break;
  }
  return kernels_internal::kScalarKernels;
}

int Column(ReduceOp op) { return op == ReduceOp::kAvg ? 0 : static_cast<int>(op); }

// The non-temporal variants are chosen only for outputs larger than half the last-level cache,
// so they are called through the level's table directly, at several alignments of dst: aligned,
// one and three elements past (the head before the first aligned block), and for the SIMD levels
// one byte past (no element-aligned block exists; the kernel must fall back to plain stores).
template <DataType kType>
void CheckStreaming(SimdLevel level, ReduceOp op,
                    const std::vector<std::vector<Storage<kType>>>& sources,
                    const std::vector<Storage<kType>>& expected_pair,
                    const std::vector<std::vector<Storage<kType>>>& expected_many,
                    const std::string& where) {
  using S = Storage<kType>;
  const auto& table = TableOf(level);
  const int t = static_cast<int>(kType);
  const size_t count = sources[0].size();
  std::vector<size_t> offsets = {0, sizeof(S), 3 * sizeof(S)};
  if (level != SimdLevel::kScalar) offsets.push_back(1);
  for (size_t offset : offsets) {
    const std::string at = " at +" + std::to_string(offset) + " bytes " + where;
    Guarded<S> dst{std::vector<S>(count), offset};
    table.binary_streaming[t][Column(op)](dst.data(), sources[0].data(), sources[1].data(), count);
    dst.Check(expected_pair, "streaming Reduce" + at);
    for (int n = 3; n <= 9; n += 3) {
      std::vector<const void*> srcs;
      for (int k = 0; k < n; ++k) srcs.push_back(sources[k].data());
      Guarded<S> many{std::vector<S>(count), offset};
      table.many_streaming[t][Column(op)](many.data(), srcs.data(), n, count);
      many.Check(expected_many[n - 1], "streaming ReduceMany n=" + std::to_string(n) + at);
    }
  }
}

template <DataType kType>
void CheckType(uint64_t seed) {
  std::mt19937_64 rng(seed);
  using S = Storage<kType>;
  for (ReduceOp op : kOps) {
    for (size_t count : kCounts) {
      std::vector<std::vector<S>> sources;
      for (int k = 0; k < 9; ++k) sources.push_back(RandomData<kType>(rng, count));
      KeepOneNanPerPosition<kType>(op, sources);
      const std::vector<std::vector<S>> pair = {sources[0], sources[1]};
      const std::vector<S> expected_pair = Expected<kType>(op, pair);
      std::vector<std::vector<S>> expected_many;
      for (int n = 1; n <= 9; ++n) {
        expected_many.push_back(
            Expected<kType>(op, std::vector<std::vector<S>>(sources.begin(), sources.begin() + n)));
      }

      for (SimdLevel level : kAllLevels) {
        if (!CpuSupports(level)) continue;
        SetSimdLevelForTesting(level);
        const std::string where = std::string(Name(kType)) + " " + Name(op) + " count " +
                                  std::to_string(count) + " " + Name(level);

        // Separate outputs start at varying offsets, so the head before the first aligned block
        // varies too.
        const size_t offset = sizeof(S) * (count % 7);
        Guarded<S> dst{std::vector<S>(count), offset};
        Reduce(kType, op, dst.data(), sources[0].data(), sources[1].data(), count);
        dst.Check(expected_pair, "Reduce " + where);

        Guarded<S> into_a(sources[0]);
        ReduceInto(kType, op, into_a.data(), sources[1].data(), count);
        into_a.Check(expected_pair, "ReduceInto " + where);

        Guarded<S> into_b(sources[1]);
        Reduce(kType, op, into_b.data(), sources[0].data(), into_b.data(), count);
        into_b.Check(expected_pair, "Reduce with dst == b " + where);

        for (int n = 1; n <= 9; ++n) {
          const std::string many = "ReduceMany n=" + std::to_string(n) + " " + where;
          std::vector<const void*> srcs;
          for (int k = 0; k < n; ++k) srcs.push_back(sources[k].data());
          Guarded<S> separate{std::vector<S>(count), offset};
          ReduceMany(kType, op, separate.data(), srcs.data(), n, count);
          separate.Check(expected_many[n - 1], many);

          // The output aliases one of the sources (the middle one).
          Guarded<S> aliased(sources[n / 2]);
          srcs[n / 2] = aliased.data();
          ReduceMany(kType, op, aliased.data(), srcs.data(), n, count);
          aliased.Check(expected_many[n - 1], "aliased " + many);
        }
        if (count != 0) {
          CheckStreaming<kType>(level, op, sources, expected_pair, expected_many, where);
        }
      }
    }
  }
}

class ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override { initial_level_ = ActiveSimdLevel(); }
  void TearDown() override { SetSimdLevelForTesting(initial_level_); }

 private:
  SimdLevel initial_level_ = SimdLevel::kScalar;
};

TEST_F(ReduceTest, Int8) { CheckType<DataType::kInt8>(1); }
TEST_F(ReduceTest, Uint8) { CheckType<DataType::kUint8>(2); }
TEST_F(ReduceTest, Int32) { CheckType<DataType::kInt32>(3); }
TEST_F(ReduceTest, Uint32) { CheckType<DataType::kUint32>(4); }
TEST_F(ReduceTest, Int64) { CheckType<DataType::kInt64>(5); }
TEST_F(ReduceTest, Uint64) { CheckType<DataType::kUint64>(6); }
TEST_F(ReduceTest, Float16) { CheckType<DataType::kFloat16>(7); }
TEST_F(ReduceTest, BFloat16) { CheckType<DataType::kBFloat16>(8); }
TEST_F(ReduceTest, Float32) { CheckType<DataType::kFloat32>(9); }
TEST_F(ReduceTest, Float64) { CheckType<DataType::kFloat64>(10); }

// The documented NaN and signed-zero rules, spelled out on fp32 at every level.
TEST_F(ReduceTest, MinMaxTakeTheIncomingOperandWhenUnordered) {
  const float nan_a = std::bit_cast<float>(0x7FC00001u);
  const float nan_b = std::bit_cast<float>(0x7FC00002u);
  const std::vector<float> a = {nan_a, 1.0f, nan_a, -0.0f, 0.0f};
  const std::vector<float> b = {2.0f, nan_b, nan_b, 0.0f, -0.0f};
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    std::vector<float> min(a.size());
    std::vector<float> max(a.size());
    Reduce(DataType::kFloat32, ReduceOp::kMin, min.data(), a.data(), b.data(), a.size());
    Reduce(DataType::kFloat32, ReduceOp::kMax, max.data(), a.data(), b.data(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(SameBits(min[i], b[i])) << Name(level) << " min " << i;
      EXPECT_TRUE(SameBits(max[i], b[i])) << Name(level) << " max " << i;
    }
  }
}

TEST_F(ReduceTest, Float16RoundsOnceForManySources) {
  // 1 + 8 * 2^-12: each pairwise step alone would round 1 + 2^-12 back to 1.
  std::vector<uint16_t> one = {0x3C00};
  std::vector<uint16_t> tiny = {0x0C00};  // 2^-12
  std::vector<const void*> srcs = {one.data()};
  for (int k = 0; k < 8; ++k) srcs.push_back(tiny.data());
  for (SimdLevel level : kAllLevels) {
    if (!CpuSupports(level)) continue;
    SetSimdLevelForTesting(level);
    uint16_t out = 0;
    ReduceMany(DataType::kFloat16, ReduceOp::kSum, &out, srcs.data(), 9, 1);
    EXPECT_EQ(out, 0x3C02) << Name(level);  // 1 + 2^-9
  }
}

}  // namespace
}  // namespace weft::testing
