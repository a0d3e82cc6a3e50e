#include "weft/shard/zero_reducer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weft/kernels/dtype.h"

namespace weft::shard {

absl::StatusOr<std::unique_ptr<ZeroReducer>> ZeroReducer::Create(Communicator* comm,
                                                                 ShardLayout layout, float* grads,
                                                                 float* params,
                                                                 const ZeroOptions& options) {
  if (comm == nullptr) return absl::InvalidArgumentError("ZeroReducer: null communicator");
  const std::string who = absl::StrCat("rank ", comm->rank(), ": ZeroReducer");
  if (options.stage != 1 && options.stage != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": stage ", options.stage, " is not 1 or 2"));
  }
  if (layout.ranks() != comm->size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": the layout is for ", layout.ranks(),
                                                   " ranks, the communicator has ", comm->size()));
  }
  std::unique_ptr<ZeroReducer> reducer(
      new ZeroReducer(comm, std::move(layout), grads, params, options));
  if (absl::Status s = reducer->CheckLayoutAcrossRanks(); !s.ok()) return s;
  return reducer;
}

ZeroReducer::ZeroReducer(Communicator* comm, ShardLayout layout, float* grads, float* params,
                         const ZeroOptions& options)
    : comm_(comm),
      layout_(std::move(layout)),
      grads_(grads),
      params_(params),
      options_(options),
      shard_grads_(layout_.shard_size(), 0.0f),
      ready_(layout_.num_units(), 0),
      works_(layout_.num_units()) {}

ZeroReducer::~ZeroReducer() {
  // Buffers handed to a collective must outlive it: wait for any unit still in flight.
  for (Work& work : works_) {
    if (!work.Test()) work.Wait(options_.timeout).IgnoreError();
  }
}

absl::Status ZeroReducer::CheckLayoutAcrossRanks() {
  std::vector<uint64_t> hashes(comm_->size());
  const uint64_t mine = layout_.hash();
  if (absl::Status s =
          comm_->AllGather(&mine, hashes.data(), 1, DataType::kUint64).Wait(options_.timeout);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", comm_->rank(),
                                               ": ZeroReducer: comparing layouts: ", s.message()));
  }
  for (int r = 0; r < comm_->size(); ++r) {
    if (hashes[r] != mine) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", comm_->rank(), ": ZeroReducer: the shard layout differs from rank ", r,
          " (hash ", absl::Hex(mine), " vs ", absl::Hex(hashes[r]), "; ", layout_.num_units(),
          " units of ", layout_.total(), " elements here): every rank must shard the same model"));
    }
  }
  return absl::OkStatus();
}

void ZeroReducer::BeginBackward(bool sync) {
  std::fill(ready_.begin(), ready_.end(), 0);
  next_to_issue_ = 0;
  in_pass_ = true;
  sync_ = sync;
}

absl::Status ZeroReducer::MarkUnitReady(int u) {
  if (!in_pass_) {
    return absl::FailedPreconditionError("ZeroReducer::MarkUnitReady outside a backward pass");
  }
  if (u < 0 || u >= layout_.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat("ZeroReducer: no unit ", u));
  }
  if (ready_[u]) {
    return absl::FailedPreconditionError(
        absl::StrCat("ZeroReducer: unit ", layout_.unit(u).name, " marked ready twice"));
  }
  ready_[u] = 1;
  if (sync_ && options_.stage == 2) IssueReadyUnits();
  return absl::OkStatus();
}

void ZeroReducer::IssueReadyUnits() {
  const int units = layout_.num_units();
  while (next_to_issue_ < units) {
    const int u = units - 1 - next_to_issue_;
    if (!ready_[u]) return;
    works_[u] = comm_->ReduceScatter(grads_ + layout_.unit(u).begin,
                                     shard_grads_.data() + layout_.shard_offset(u),
                                     layout_.slice(u), DataType::kFloat32, ReduceOp::kAvg);
    ++next_to_issue_;
  }
}

absl::Status ZeroReducer::WaitAll(std::vector<Work>& works, const char* what,
                                  absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + timeout;
  absl::Status first;
  // Every one is waited for, even after a failure: their buffers must outlive them.
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    absl::Status s = works[u].Wait(std::max(absl::ZeroDuration(), give_up - absl::Now()));
    if (!s.ok() && first.ok()) {
      first = absl::Status(
          s.code(), absl::StrCat("rank ", comm_->rank(), ": ZeroReducer: ", what, " of unit ",
                                 layout_.unit(u).name, ": ", s.message()));
    }
  }
  last_wait_ = absl::Now() - start;
  return first;
}

absl::Status ZeroReducer::Finish(absl::Duration timeout) {
  if (!in_pass_) return absl::FailedPreconditionError("ZeroReducer::Finish without BeginBackward");
  in_pass_ = false;
  last_wait_ = absl::ZeroDuration();
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (!ready_[u]) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", comm_->rank(), ": ZeroReducer: unit ", layout_.unit(u).name,
                       " was never marked ready in this backward pass"));
    }
  }
  if (!sync_) return absl::OkStatus();
  IssueReadyUnits();
  std::vector<Work> works = std::move(works_);
  works_.assign(layout_.num_units(), Work());
  return WaitAll(works, "reduce-scatter", timeout);
}

absl::Status ZeroReducer::GatherParams(absl::Duration timeout) {
  std::vector<Work> works(layout_.num_units());
  const int rank = comm_->rank();
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    float* unit = params_ + layout_.unit(u).begin;
    works[u] = comm_->AllGather(unit + static_cast<size_t>(rank) * layout_.slice(u), unit,
                                layout_.slice(u), DataType::kFloat32);
  }
  return WaitAll(works, "all-gather of the parameters", timeout);
}

absl::Status ZeroReducer::GatherShards(const float* shard, float* full, absl::Duration timeout) {
  std::vector<Work> works(layout_.num_units());
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    works[u] = comm_->AllGather(shard + layout_.shard_offset(u), full + layout_.unit(u).begin,
                                layout_.slice(u), DataType::kFloat32);
  }
  const absl::Duration before = last_wait_;
  absl::Status s = WaitAll(works, "all-gather of a shard", timeout);
  last_wait_ = before;
  return s;
}

}  // namespace weft::shard
