#include "weft/shard/bucket_plan.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "weft/kernels/hash.h"

namespace weft::shard {
namespace {

template <typename T>
uint64_t HashValue(uint64_t h, T value) {
  return Fnv1a(&value, sizeof(value), h);
}

// The start of the range `members` tile with no gaps when sorted by address, else null.
unsigned char* ContiguousStart(const std::vector<Gradient>& gradients, std::vector<size_t> members,
                               size_t element_size) {
  std::sort(members.begin(), members.end(),
            [&](size_t a, size_t c) { return gradients[a].data < gradients[c].data; });
  auto* start = static_cast<unsigned char*>(gradients[members[0]].data);
  unsigned char* end = start;
  for (size_t k : members) {
    auto* data = static_cast<unsigned char*>(gradients[k].data);
    if (data != end) return nullptr;
    end = data + gradients[k].count * element_size;
  }
  return start;
}

}  // namespace

absl::StatusOr<BucketPlan> BucketPlan::Create(const std::vector<Gradient>& gradients,
                                              const BucketPlanOptions& options) {
  if (options.bucket_cap_bytes == 0 || options.first_bucket_cap_bytes == 0) {
    return absl::InvalidArgumentError("bucket caps must be positive");
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].data == nullptr || gradients[i].count == 0) {
      return absl::InvalidArgumentError(absl::StrCat("gradient ", i, " (\"", gradients[i].name,
                                                     "\") has no data or zero elements"));
    }
  }
  const size_t element_size = SizeOf(options.type);
  BucketPlan plan;
  plan.bucket_of_.assign(gradients.size(), -1);
  Bucket current;
  for (size_t k = gradients.size(); k-- > 0;) {
    current.members.push_back(k);
    current.bytes += gradients[k].count * element_size;
    const size_t cap =
        plan.buckets_.empty() ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
    if (current.bytes >= cap || k == 0) {
      plan.buckets_.push_back(std::move(current));
      current = Bucket();
    }
  }
  uint64_t h = kFnvOffset;
  h = HashValue(h, gradients.size());
  h = HashValue(h, static_cast<int>(options.type));
  for (size_t b = 0; b < plan.buckets_.size(); ++b) {
    Bucket& bucket = plan.buckets_[b];
    h = HashValue(h, bucket.members.size());
    for (size_t k : bucket.members) {
      plan.bucket_of_[k] = static_cast<int>(b);
      h = HashValue(h, k);
      h = HashValue(h, gradients[k].count);
      h = Fnv1a(gradients[k].name, h);
    }
    bucket.contiguous = ContiguousStart(gradients, bucket.members, element_size);
  }
  plan.hash_ = h;
  return plan;
}

}  // namespace weft::shard
