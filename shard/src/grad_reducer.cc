#include "weft/shard/grad_reducer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "feedback_state.h"
#include "weft/kernels/convert.h"
#include "weft/kernels/dtype.h"
#include "weft/kernels/hash.h"

namespace weft::shard {
namespace {

bool Is16Bit(DataType type) { return type == DataType::kFloat16 || type == DataType::kBFloat16; }

}  // namespace

absl::StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(
    Communicator* comm, std::vector<Gradient> gradients, const GradReducerOptions& options) {
  if (comm == nullptr) return absl::InvalidArgumentError("GradReducer: null communicator");
  const std::string who = absl::StrCat("rank ", comm->rank(), ": GradReducer");
  if (!IsFloatingPoint(options.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": gradients must be floating point, not ", Name(options.type)));
  }
  const DataType wire = options.wire_type.value_or(options.type);
  if (wire != options.type && !(options.type == DataType::kFloat32 && Is16Bit(wire))) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": wire type ", Name(wire), " (", static_cast<int>(wire), ") for ", Name(options.type),
        " gradients: it must be the gradients' own type, or half or bfloat16 "
        "for float gradients"));
  }
  if (options.compression.has_value() &&
      (options.type != DataType::kFloat32 || wire != options.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": compression needs float gradients reduced in their own type (got ",
                     Name(options.type), " over ", Name(wire), ")"));
  }
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(gradients, options);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(), absl::StrCat(who, ": ", plan.status().message()));
  }
  std::unique_ptr<GradReducer> reducer(
      new GradReducer(comm, std::move(gradients), options, std::move(*plan)));
  if (absl::Status s = reducer->CheckPlanAcrossRanks(); !s.ok()) return s;
  if (absl::Status s = reducer->CreateCompressors(); !s.ok()) return s;
  return reducer;
}

GradReducer::GradReducer(Communicator* comm, std::vector<Gradient> gradients,
                         const GradReducerOptions& options, BucketPlan plan)
    : comm_(comm),
      gradients_(std::move(gradients)),
      options_(options),
      element_size_(SizeOf(options.type)),
      wire_type_(options.wire_type.value_or(options.type)),
      plan_(std::move(plan)),
      state_(plan_.num_buckets()),
      ready_(gradients_.size(), 0) {
  for (int b = 0; b < plan_.num_buckets(); ++b) {
    const Bucket& bucket = plan_.bucket(b);
    if (wire_type_ != options_.type) {
      // Contiguous or not: the all-reduce runs on the rounded copy.
      state_[b].narrow.resize(bucket.bytes / element_size_);
      staging_bytes_ += state_[b].narrow.size() * sizeof(uint16_t);
    } else if (bucket.contiguous == nullptr) {
      state_[b].staging.resize(bucket.bytes);
      staging_bytes_ += bucket.bytes;
    }
  }
}

absl::Status GradReducer::CreateCompressors() {
  if (!options_.compression.has_value()) return absl::OkStatus();
  for (int b = 0; b < plan_.num_buckets(); ++b) {
    absl::StatusOr<std::unique_ptr<CompressedAllReduce>> compressed = CompressedAllReduce::Create(
        comm_, plan_.bucket(b).bytes / element_size_, *options_.compression);
    if (!compressed.ok()) return compressed.status();
    state_[b].compressed = *std::move(compressed);
  }
  return absl::OkStatus();
}

uint64_t GradReducer::compressed_wire_bytes() const {
  uint64_t bytes = 0;
  for (const BucketState& state : state_) {
    if (state.compressed != nullptr) bytes += state.compressed->wire_bytes();
  }
  return bytes;
}

std::vector<CompressedAllReduce*> GradReducer::Compressors() const {
  std::vector<CompressedAllReduce*> all;
  for (const BucketState& state : state_) {
    if (state.compressed != nullptr) all.push_back(state.compressed.get());
  }
  return all;
}

std::vector<float> GradReducer::compression_errors() const { return JoinErrors(Compressors()); }

absl::Status GradReducer::RestoreCompressionErrors(const std::vector<float>& errors) {
  return SplitErrors(Compressors(), errors, "GradReducer");
}

GradReducer::~GradReducer() {
  // Buffers handed to an all-reduce must outlive it: wait for any bucket still in flight.
  for (BucketState& bucket : state_) {
    if (bucket.work.Test()) continue;
    bucket.work.Wait(options_.timeout).IgnoreError();
  }
}

absl::Status GradReducer::CheckPlanAcrossRanks() {
  const int size = comm_->size();
  // Per rank: the plan's hash with the wire type mixed in, and the wire type (for the message).
  std::vector<uint64_t> hashes(2 * size);
  // Compression (codec and block) is part of the plan: ranks must agree on it too.
  const int64_t codec[2] = {
      options_.compression ? static_cast<int64_t>(options_.compression->codec) : -1,
      options_.compression ? static_cast<int64_t>(options_.compression->block) : 0};
  const uint64_t mine[2] = {
      Fnv1a(codec, sizeof(codec), Fnv1a(&wire_type_, sizeof(wire_type_), plan_.hash())),
      static_cast<uint64_t>(wire_type_)};
  Work work = comm_->AllGather(mine, hashes.data(), 2, DataType::kUint64);
  if (absl::Status s = work.Wait(options_.timeout); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("rank ", comm_->rank(),
                                     ": GradReducer: comparing bucket plans: ", s.message()));
  }
  for (int r = 0; r < size; ++r) {
    if (hashes[2 * r] != mine[0]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", comm_->rank(), ": GradReducer: the bucket plan or wire type differs from rank ",
          r, " (hash ", absl::Hex(mine[0]), " vs ", absl::Hex(hashes[2 * r]), "; wire ",
          Name(wire_type_), " here, ", Name(static_cast<DataType>(hashes[2 * r + 1])), " there; ",
          gradients_.size(), " gradients in ", plan_.num_buckets(),
          " buckets here): every rank must register the same gradients, with the same names and "
          "sizes, in the same order, with the same bucket caps and wire type"));
    }
  }
  return absl::OkStatus();
}

void GradReducer::BeginBackward(bool sync) {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (int b = 0; b < plan_.num_buckets(); ++b) state_[b].pending = plan_.bucket(b).members.size();
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
  --state_[plan_.bucket_of(index)].pending;
  if (sync_) IssueReadyBuckets();
  return absl::OkStatus();
}

void GradReducer::IssueReadyBuckets() {
  while (next_to_issue_ < plan_.num_buckets() && state_[next_to_issue_].pending == 0) {
    const Bucket& bucket = plan_.bucket(next_to_issue_);
    BucketState& state = state_[next_to_issue_];
    const size_t count = bucket.bytes / element_size_;
    if (wire_type_ != options_.type) {
      Narrow(next_to_issue_);
      state.work = comm_->AllReduce(state.narrow.data(), state.narrow.data(), count, wire_type_,
                                    ReduceOp::kAvg);
      ++next_to_issue_;
      continue;
    }
    void* data = bucket.contiguous;
    if (data == nullptr) {
      unsigned char* out = state.staging.data();
      for (size_t k : bucket.members) {
        const size_t n = gradients_[k].count * element_size_;
        std::memcpy(out, gradients_[k].data, n);
        out += n;
      }
      data = state.staging.data();
    }
    if (compressing()) {
      // Runs to completion here, in the fixed bucket order every rank issues.
      state.compressed_result = state.compressed->Run(static_cast<float*>(data));
      ++next_to_issue_;
      continue;
    }
    state.work = comm_->AllReduce(data, data, count, options_.type, ReduceOp::kAvg);
    ++next_to_issue_;
  }
}

void GradReducer::Narrow(int b) {
  uint16_t* out = state_[b].narrow.data();
  for (size_t k : plan_.bucket(b).members) {
    const auto* in = static_cast<const float*>(gradients_[k].data);
    if (wire_type_ == DataType::kBFloat16) {
      FloatToBFloat16(in, out, gradients_[k].count);
    } else {
      FloatToHalf(in, out, gradients_[k].count);
    }
    out += gradients_[k].count;
  }
}

void GradReducer::Widen(int b) {
  const uint16_t* in = state_[b].narrow.data();
  for (size_t k : plan_.bucket(b).members) {
    auto* out = static_cast<float*>(gradients_[k].data);
    if (wire_type_ == DataType::kBFloat16) {
      BFloat16ToFloat(in, out, gradients_[k].count);
    } else {
      HalfToFloat(in, out, gradients_[k].count);
    }
    in += gradients_[k].count;
  }
}

std::string GradReducer::Describe(int b) const {
  const Bucket& bucket = plan_.bucket(b);
  std::vector<std::string> names;
  for (size_t k : bucket.members) {
    if (names.size() == 4) {
      names.push_back(absl::StrCat("... ", bucket.members.size() - 4, " more"));
      break;
    }
    names.push_back(gradients_[k].name);
  }
  return absl::StrCat("bucket ", b, " of ", plan_.num_buckets(), " (", bucket.bytes,
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
          who, ": gradient ", k, " (\"", gradients_[k].name, "\", in ",
          Describe(plan_.bucket_of(k)),
          ") was never marked ready in this pass; every registered gradient must be marked"));
    }
  }
  if (!sync_) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  for (int b = 0; b < plan_.num_buckets(); ++b) {
    const Bucket& bucket = plan_.bucket(b);
    BucketState& state = state_[b];
    const bool compressed = state.compressed_result.has_value();
    absl::Status s = compressed
                         ? *std::exchange(state.compressed_result, std::nullopt)
                         : state.work.Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!compressed && absl::IsDeadlineExceeded(s) && !state.work.Test()) {
      last_wait_ = absl::Now() - start;
      return absl::DeadlineExceededError(absl::StrCat(
          who, ": ", Describe(b), " not reduced within ", absl::FormatDuration(timeout),
          " (a peer may be slow, stuck or in a different step)"));
    }
    if (!s.ok()) {
      last_wait_ = absl::Now() - start;
      return absl::Status(s.code(), absl::StrCat(who, ": ", Describe(b), ": ", s.message()));
    }
    if (wire_type_ != options_.type) {
      Widen(b);
    } else if (bucket.contiguous == nullptr) {
      const unsigned char* in = state.staging.data();
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

}  // namespace weft::shard
