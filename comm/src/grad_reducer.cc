#include "weft/comm/grad_reducer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace weft {
namespace {

// FNV-1a over bytes: the plan hash only has to differ when plans differ.
uint64_t HashBytes(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
uint64_t HashValue(uint64_t h, T value) {
  return HashBytes(h, &value, sizeof(value));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(
    Communicator* comm, std::vector<Gradient> gradients, const GradReducerOptions& options) {
  if (comm == nullptr) return absl::InvalidArgumentError("GradReducer: null communicator");
  const std::string who = absl::StrCat("rank ", comm->rank(), ": GradReducer");
  if (!IsFloatingPoint(options.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": gradients must be floating point, not ", Name(options.type)));
  }
  if (options.bucket_cap_bytes == 0 || options.first_bucket_cap_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": bucket caps must be positive"));
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].data == nullptr || gradients[i].count == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": gradient ", i, " (\"", gradients[i].name, "\") has no data or zero elements"));
    }
  }
  std::unique_ptr<GradReducer> reducer(new GradReducer(comm, std::move(gradients), options));
  reducer->Plan();
  if (absl::Status s = reducer->CheckPlanAcrossRanks(); !s.ok()) return s;
  return reducer;
}

GradReducer::GradReducer(Communicator* comm, std::vector<Gradient> gradients,
                         const GradReducerOptions& options)
    : comm_(comm),
      gradients_(std::move(gradients)),
      options_(options),
      element_size_(SizeOf(options.type)) {}

GradReducer::~GradReducer() {
  // Buffers handed to an all-reduce must outlive it: wait for any bucket still in flight.
  for (Bucket& bucket : buckets_) {
    if (bucket.work.Test()) continue;
    bucket.work.Wait(options_.timeout).IgnoreError();
  }
}

void GradReducer::Plan() {
  bucket_of_.assign(gradients_.size(), -1);
  ready_.assign(gradients_.size(), 0);
  Bucket current;
  for (size_t k = gradients_.size(); k-- > 0;) {
    current.members.push_back(k);
    current.bytes += gradients_[k].count * element_size_;
    const size_t cap =
        buckets_.empty() ? options_.first_bucket_cap_bytes : options_.bucket_cap_bytes;
    if (current.bytes >= cap || k == 0) {
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  h = HashValue(h, gradients_.size());
  h = HashValue(h, static_cast<int>(options_.type));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    h = HashValue(h, bucket.members.size());
    for (size_t k : bucket.members) {
      bucket_of_[k] = static_cast<int>(b);
      h = HashValue(h, k);
      h = HashValue(h, gradients_[k].count);
      h = HashBytes(h, gradients_[k].name.data(), gradients_[k].name.size());
    }
    // In place when the members, sorted by address, tile one range with no gaps.
    std::vector<size_t> by_address = bucket.members;
    std::sort(by_address.begin(), by_address.end(),
              [&](size_t a, size_t c) { return gradients_[a].data < gradients_[c].data; });
    auto* start = static_cast<unsigned char*>(gradients_[by_address[0]].data);
    unsigned char* end = start;
    bool contiguous = true;
    for (size_t k : by_address) {
      auto* data = static_cast<unsigned char*>(gradients_[k].data);
      if (data != end) contiguous = false;
      end = data + gradients_[k].count * element_size_;
    }
    if (contiguous) {
      bucket.in_place = start;
    } else {
      bucket.staging.resize(bucket.bytes);
    }
  }
  plan_hash_ = h;
}

absl::Status GradReducer::CheckPlanAcrossRanks() {
  const int size = comm_->size();
  std::vector<uint64_t> hashes(size);
  const uint64_t mine = plan_hash_;
  Work work = comm_->AllGather(&mine, hashes.data(), 1, DataType::kUint64);
  if (absl::Status s = work.Wait(options_.timeout); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("rank ", comm_->rank(),
                                     ": GradReducer: comparing bucket plans: ", s.message()));
  }
  for (int r = 0; r < size; ++r) {
    if (hashes[r] != mine) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", comm_->rank(), ": GradReducer: the gradient bucket plan differs from rank ", r,
          " (hash ", absl::Hex(mine), " vs ", absl::Hex(hashes[r]), "; ", gradients_.size(),
          " gradients in ", buckets_.size(),
          " buckets here): every rank must register the same gradients, with the same names and "
          "sizes, in the same order, with the same bucket caps"));
    }
  }
  return absl::OkStatus();
}

void GradReducer::BeginBackward(bool sync) {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (Bucket& bucket : buckets_) bucket.pending = bucket.members.size();
  next_to_issue_ = 0;
  sync_ = sync;
  in_pass_ = true;
}

absl::Status GradReducer::MarkReady(size_t index) {
  if (!in_pass_) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", comm_->rank(), ": GradReducer::MarkReady(", index,
                     ") outside a backward pass: call BeginBackward first"));
  }
  if (index >= gradients_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", comm_->rank(),
                                                   ": GradReducer::MarkReady(", index, "): only ",
                                                   gradients_.size(), " gradients are registered"));
  }
  if (ready_[index]) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", comm_->rank(), ": GradReducer: gradient ", index, " (\"",
                     gradients_[index].name, "\") marked ready twice in one backward pass"));
  }
  ready_[index] = 1;
  --buckets_[bucket_of_[index]].pending;
  if (sync_) IssueReadyBuckets();
  return absl::OkStatus();
}

void GradReducer::IssueReadyBuckets() {
  while (next_to_issue_ < num_buckets() && buckets_[next_to_issue_].pending == 0) {
    Bucket& bucket = buckets_[next_to_issue_];
    void* data = bucket.in_place;
    if (data == nullptr) {
      unsigned char* out = bucket.staging.data();
      for (size_t k : bucket.members) {
        const size_t n = gradients_[k].count * element_size_;
        std::memcpy(out, gradients_[k].data, n);
        out += n;
      }
      data = bucket.staging.data();
    }
    bucket.work =
        comm_->AllReduce(data, data, bucket.bytes / element_size_, options_.type, ReduceOp::kAvg);
    ++next_to_issue_;
  }
}

std::string GradReducer::Describe(int b) const {
  const Bucket& bucket = buckets_[b];
  std::vector<std::string> names;
  for (size_t k : bucket.members) {
    if (names.size() == 4) {
      names.push_back(absl::StrCat("... ", bucket.members.size() - 4, " more"));
      break;
    }
    names.push_back(gradients_[k].name);
  }
  return absl::StrCat("bucket ", b, " of ", buckets_.size(), " (", bucket.bytes,
                      " bytes: ", absl::StrJoin(names, ", "), ")");
}

absl::Status GradReducer::Finish(absl::Duration timeout) {
  const std::string who = absl::StrCat("rank ", comm_->rank(), ": GradReducer::Finish");
  if (!in_pass_) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": no backward pass begun (call BeginBackward)"));
  }
  in_pass_ = false;
  last_wait_ = absl::ZeroDuration();
  for (size_t k = 0; k < gradients_.size(); ++k) {
    if (!ready_[k]) {
      return absl::FailedPreconditionError(absl::StrCat(
          who, ": gradient ", k, " (\"", gradients_[k].name, "\", in ", Describe(bucket_of_[k]),
          ") was never marked ready in this pass; every registered gradient must be marked"));
    }
  }
  if (!sync_) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  for (int b = 0; b < num_buckets(); ++b) {
    Bucket& bucket = buckets_[b];
    absl::Status s = bucket.work.Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (absl::IsDeadlineExceeded(s) && !bucket.work.Test()) {
      last_wait_ = absl::Now() - start;
      return absl::DeadlineExceededError(absl::StrCat(
          who, ": ", Describe(b), " not reduced within ", absl::FormatDuration(timeout),
          " (a peer may be slow, stuck or in a different step)"));
    }
    if (!s.ok()) {
      last_wait_ = absl::Now() - start;
      return absl::Status(s.code(), absl::StrCat(who, ": ", Describe(b), ": ", s.message()));
    }
    if (bucket.in_place == nullptr) {
      const unsigned char* in = bucket.staging.data();
      for (size_t k : bucket.members) {
        const size_t n = gradients_[k].count * element_size_;
        std::memcpy(gradients_[k].data, in, n);
        in += n;
      }
    }
  }
  last_wait_ = absl::Now() - start;
  return absl::OkStatus();
}

}  // namespace weft
