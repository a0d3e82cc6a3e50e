// BucketPlan in process: bucket boundaries under both caps, reverse filling, gradients larger
// than a cap, contiguity, the plan hash and argument errors.
#include "weft/shard/bucket_plan.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace weft::shard {
namespace {

using Members = std::vector<size_t>;

// Float gradients of sizes `counts`, back to back in one buffer, named g0, g1, ...
struct Flat {
  std::vector<float> buffer;
  std::vector<Gradient> grads;

  explicit Flat(const std::vector<size_t>& counts) {
    size_t total = 0;
    for (size_t n : counts) total += n;
    buffer.resize(total);
    size_t offset = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      grads.push_back({"g" + std::to_string(k), buffer.data() + offset, counts[k]});
      offset += counts[k];
    }
  }
};

BucketPlan MustPlan(const std::vector<Gradient>& grads, size_t first_cap, size_t cap,
                    DataType type = DataType::kFloat32) {
  BucketPlanOptions options;
  options.first_bucket_cap_bytes = first_cap;
  options.bucket_cap_bytes = cap;
  options.type = type;
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(grads, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

std::vector<Members> MembersOf(const BucketPlan& plan) {
  std::vector<Members> out;
  for (int b = 0; b < plan.num_buckets(); ++b) out.push_back(plan.bucket(b).members);
  return out;
}

TEST(BucketPlan, FillsInReverseRegistrationOrderUpToTheCaps) {
  // 16 bytes each; the first bucket closes at 32 bytes, the others at 48.
  Flat flat({4, 4, 4, 4, 4, 4});
  const BucketPlan plan = MustPlan(flat.grads, 32, 48);
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{5, 4}, {3, 2, 1}, {0}}));
  EXPECT_EQ(plan.bucket(0).bytes, 32u);
  EXPECT_EQ(plan.bucket(1).bytes, 48u);
  EXPECT_EQ(plan.bucket(2).bytes, 16u);  // the last bucket holds what is left
  ASSERT_EQ(plan.num_gradients(), 6u);
  const std::vector<int> expected_bucket_of = {2, 1, 1, 1, 0, 0};
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(plan.bucket_of(k), expected_bucket_of[k]) << k;
}

TEST(BucketPlan, FirstBucketHasItsOwnCap) {
  Flat flat({4, 4, 4, 4, 4, 4, 4, 4});
  EXPECT_EQ(MembersOf(MustPlan(flat.grads, 16, 64)),
            (std::vector<Members>{{7}, {6, 5, 4, 3}, {2, 1, 0}}));
  // A first cap larger than everything: one bucket.
  EXPECT_EQ(MembersOf(MustPlan(flat.grads, 1 << 20, 16)),
            (std::vector<Members>{{7, 6, 5, 4, 3, 2, 1, 0}}));
}

TEST(BucketPlan, GradientLargerThanTheCapEndsItsBucket) {
  // g1 is 400 bytes against a 32-byte cap: it closes the bucket it joins, and the next gradient
  // starts a new one.
  Flat flat({2, 100, 2, 2, 2});
  const BucketPlan plan = MustPlan(flat.grads, 8, 32);
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{4}, {3, 2, 1}, {0}}));
  EXPECT_EQ(plan.bucket(1).bytes, 416u);
  // Right after a bucket closes, it is a bucket of its own.
  Flat alone({2, 100, 2, 2});
  EXPECT_EQ(MembersOf(MustPlan(alone.grads, 16, 32)), (std::vector<Members>{{3, 2}, {1}, {0}}));
}

TEST(BucketPlan, ElementSizeComesFromTheType) {
  // The same counts in 2-byte elements fill half the bytes: the first bucket takes twice as many.
  Flat flat({4, 4, 4, 4});
  EXPECT_EQ(MembersOf(MustPlan(flat.grads, 16, 16, DataType::kFloat32)),
            (std::vector<Members>{{3}, {2}, {1}, {0}}));
  EXPECT_EQ(MembersOf(MustPlan(flat.grads, 16, 16, DataType::kBFloat16)),
            (std::vector<Members>{{3, 2}, {1, 0}}));
}

TEST(BucketPlan, BackToBackGradientsAreContiguous) {
  Flat flat({3, 5, 2, 7});
  const BucketPlan plan = MustPlan(flat.grads, 20, 1 << 20);
  ASSERT_EQ(MembersOf(plan), (std::vector<Members>{{3}, {2, 1, 0}}));
  // The range starts at the lowest address, g0's, though g0 was filled last.
  EXPECT_EQ(plan.bucket(0).contiguous, static_cast<unsigned char*>(flat.grads[3].data));
  EXPECT_EQ(plan.bucket(1).contiguous, static_cast<unsigned char*>(flat.grads[0].data));
}

TEST(BucketPlan, ContiguityIgnoresRegistrationOrderButNotGaps) {
  std::vector<float> buffer(16);
  // Registered out of address order but tiling [0, 10): contiguous.
  const std::vector<Gradient> shuffled = {
      {"a", buffer.data() + 6, 4}, {"b", buffer.data(), 2}, {"c", buffer.data() + 2, 4}};
  EXPECT_EQ(MustPlan(shuffled, 1 << 20, 1 << 20).bucket(0).contiguous,
            reinterpret_cast<unsigned char*>(buffer.data()));
  // One element left out between b and c: packed.
  const std::vector<Gradient> gap = {{"b", buffer.data(), 2}, {"c", buffer.data() + 3, 4}};
  EXPECT_EQ(MustPlan(gap, 1 << 20, 1 << 20).bucket(0).contiguous, nullptr);
  // Apart (one element between them; separate allocations may happen to abut): packed, except a
  // bucket of one gradient.
  std::vector<float> both(9);
  float* x = both.data();
  float* y = both.data() + 5;
  const std::vector<Gradient> separate = {{"x", x, 4}, {"y", y, 4}};
  EXPECT_EQ(MustPlan(separate, 1 << 20, 1 << 20).bucket(0).contiguous, nullptr);
  const BucketPlan singles = MustPlan(separate, 16, 16);
  EXPECT_EQ(singles.bucket(0).contiguous, reinterpret_cast<unsigned char*>(y));
  EXPECT_EQ(singles.bucket(1).contiguous, reinterpret_cast<unsigned char*>(x));
}

TEST(BucketPlan, HashIsTheSameForTheSameGradientsAnywhereInMemory) {
  Flat a({4, 8, 2}), b({4, 8, 2});
  EXPECT_EQ(MustPlan(a.grads, 16, 32).hash(), MustPlan(b.grads, 16, 32).hash());
}

TEST(BucketPlan, HashChangesWithNameSizeOrderBoundariesAndType) {
  Flat base({4, 8, 2, 6});
  const uint64_t h = MustPlan(base.grads, 16, 32).hash();

  Flat renamed = base;
  renamed.grads[1].name = "other";
  EXPECT_NE(MustPlan(renamed.grads, 16, 32).hash(), h) << "name";

  Flat resized({4, 9, 2, 6});
  EXPECT_NE(MustPlan(resized.grads, 16, 32).hash(), h) << "size";

  Flat swapped = base;
  std::swap(swapped.grads[0], swapped.grads[2]);
  EXPECT_NE(MustPlan(swapped.grads, 16, 32).hash(), h) << "order";

  EXPECT_NE(MustPlan(base.grads, 64, 32).hash(), h) << "boundaries";
  EXPECT_NE(MustPlan(base.grads, 16, 32, DataType::kFloat64).hash(), h) << "type";
  EXPECT_NE(
      MustPlan(std::vector<Gradient>(base.grads.begin(), base.grads.end() - 1), 16, 32).hash(), h)
      << "count";
}

TEST(BucketPlan, RejectsZeroCapsAndEmptyGradients) {
  Flat flat({4, 4});
  BucketPlanOptions options;
  options.bucket_cap_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::Create(flat.grads, options).status()));
  options = {};
  options.first_bucket_cap_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::Create(flat.grads, options).status()));

  std::vector<Gradient> grads = flat.grads;
  grads[1].count = 0;
  absl::Status s = BucketPlan::Create(grads, {}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("\"g1\""), std::string::npos) << s;
  grads[1] = {"g1", nullptr, 4};
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::Create(grads, {}).status()));
}

}  // namespace
}  // namespace weft::shard
