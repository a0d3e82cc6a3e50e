// BucketPlan: how gradients are grouped into buckets for data-parallel communication.
//
//   std::vector<weft::shard::Gradient> grads = {{"wte", wte_grad, n_wte}, ...};  // forward order
//   absl::StatusOr<weft::shard::BucketPlan> plan = weft::shard::BucketPlan::Create(grads, {});
//   for (int b = 0; b < plan->num_buckets(); ++b) ... plan->bucket(b).members ...
//
// Gradients are registered in forward order. Backward produces them roughly in reverse, so
// buckets are filled in reverse registration order: the first bucket (default cap 1 MiB, small so
// that communication starts early) takes the last-registered gradients, the rest up to the cap
// (default 25 MiB) each. A bucket closes once its bytes reach its cap, so a gradient larger than a
// cap ends the bucket it joins; the last bucket holds whatever is left.
//
// A bucket whose gradients, sorted by address, tile one range with no gaps is contiguous: its
// collective can run in place on that range. The plan's hash covers the element type, the bucket
// boundaries and every gradient's index, size and name, so ranks whose plans agree on the hash
// issue the same collectives.
//
// Pure: planning reads only the names, sizes and addresses it is given, never the data, and
// communicates nothing. The all-reduce reducer (GradReducer) uses it; reduce-scatter reducers
// (ZeRO-2/3, FSDP) bucket the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weft/kernels/dtype.h"

namespace weft::shard {

struct Gradient {
  std::string name;
  void* data = nullptr;  // stays valid and in place for as long as a plan over it is used
  size_t count = 0;      // elements
};

struct BucketPlanOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t first_bucket_cap_bytes = size_t{1} << 20;
  DataType type = DataType::kFloat32;
};

struct Bucket {
  std::vector<size_t> members;  // registration indices, in the order they were filled
  size_t bytes = 0;
  // Start of the range the members tile back to back, or null when they do not.
  unsigned char* contiguous = nullptr;
};

class BucketPlan {
 public:
  // Errors: a cap of zero, a gradient with no data or zero elements.
  static absl::StatusOr<BucketPlan> Create(const std::vector<Gradient>& gradients,
                                           const BucketPlanOptions& options);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  const Bucket& bucket(int b) const { return buckets_[b]; }
  // The bucket that holds gradient `index` (registration order).
  int bucket_of(size_t index) const { return bucket_of_[index]; }
  size_t num_gradients() const { return bucket_of_.size(); }
  // Identical on every rank that registered the same gradients with the same options.
  uint64_t hash() const { return hash_; }

 private:
  BucketPlan() = default;

  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // per gradient
  uint64_t hash_ = 0;
};

}  // namespace weft::shard
