#include "weft/shard/zero_reducer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "feedback_state.h"
#include "weft/kernels/convert.h"
#include "weft/kernels/dtype.h"
#include "weft/kernels/hash.h"

namespace weft::shard {

absl::StatusOr<std::unique_ptr<ZeroReducer>> ZeroReducer::Create(Communicator* comm,
                                                                 ShardLayout layout,
                                                                 FlatBuffer* grads,
                                                                 FlatBuffer* params,
                                                                 const ZeroOptions& options) {
  if (comm == nullptr) return absl::InvalidArgumentError("ZeroReducer: null communicator");
  const std::string who = absl::StrCat("rank ", comm->rank(), ": ZeroReducer");
  if (options.stage < 1 || options.stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": stage ", options.stage, " is not 1, 2 or 3"));
  }
  const DataType wire = options.wire_type;
  if (wire != DataType::kFloat32 && wire != DataType::kFloat16 && wire != DataType::kBFloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": wire type ", Name(wire), " (", static_cast<int>(wire),
                     ") for float gradients: it must be float, half or bfloat16"));
  }
  if (options.compression.has_value() &&
      (wire != DataType::kFloat32 || options.replicas != nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": compression needs the fp32 wire (got ", Name(wire),
        ") and shard groups of every rank (no hybrid sharding): it replaces the reduce-scatters"));
  }
  if (layout.ranks() != comm->size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": the layout is for ", layout.ranks(),
                                                   " ranks, the communicator has ", comm->size()));
  }
  if (grads->size() < layout.total() || params->size() < layout.total()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": buffers of ", grads->size(), " and ",
                                                   params->size(), " elements for a layout of ",
                                                   layout.total()));
  }
  std::unique_ptr<ZeroReducer> reducer(
      new ZeroReducer(comm, std::move(layout), grads, params, options));
  if (absl::Status s = reducer->CheckLayoutAcrossRanks(); !s.ok()) return s;
  if (options.compression.has_value()) {
    for (int u = 0; u < reducer->layout_.num_units(); ++u) {
      absl::StatusOr<std::unique_ptr<CompressedReduceScatter>> rs = CompressedReduceScatter::Create(
          comm, reducer->layout_.unit(u).length, *options.compression);
      if (!rs.ok()) return rs.status();
      if ((*rs)->chunk() != reducer->layout_.slice(u)) {
        return absl::InternalError(absl::StrCat(who, ": unit ", reducer->layout_.unit(u).name,
                                                " is not cut into equal slices"));
      }
      reducer->compressed_.push_back(*std::move(rs));
    }
    reducer->compressed_results_.resize(reducer->layout_.num_units());
  }
  return reducer;
}

ZeroReducer::ZeroReducer(Communicator* comm, ShardLayout layout, FlatBuffer* grads,
                         FlatBuffer* params, const ZeroOptions& options)
    : comm_(comm),
      layout_(std::move(layout)),
      grads_(grads),
      params_(params),
      options_(options),
      shard_params_(options_.stage == 3 ? layout_.shard_size() : 0, 0.0f),
      shard_grads_(options_.stage >= 2 ? layout_.shard_size() : 0, 0.0f),
      ready_(layout_.num_units(), 0),
      reductions_(layout_.num_units()),
      replica_sums_(layout_.num_units()),
      unit_grads_(layout_.num_units(), nullptr),
      gathered_(layout_.num_units(), nullptr),
      gathers_(layout_.num_units()),
      wire_(layout_.num_units(), nullptr) {}

ZeroReducer::~ZeroReducer() {
  // Buffers handed to a collective must outlive it: wait for any still in flight.
  for (std::vector<Work>* works : {&reductions_, &replica_sums_, &gathers_}) {
    for (Work& work : *works) {
      if (!work.Test()) work.Wait(options_.timeout).IgnoreError();
    }
  }
}

absl::Status ZeroReducer::CheckLayoutAcrossRanks() {
  // Per rank: the layout's hash with the wire type and codec mixed in, and the wire type (for the
  // message).
  const DataType wire = options_.wire_type;
  const int64_t codec[2] = {
      options_.compression ? static_cast<int64_t>(options_.compression->codec) : -1,
      options_.compression ? static_cast<int64_t>(options_.compression->block) : 0};
  std::vector<uint64_t> hashes(2 * comm_->size());
  const uint64_t mine[2] = {Fnv1a(codec, sizeof(codec), Fnv1a(&wire, sizeof(wire), layout_.hash())),
                            static_cast<uint64_t>(wire)};
  if (absl::Status s =
          comm_->AllGather(mine, hashes.data(), 2, DataType::kUint64).Wait(options_.timeout);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", comm_->rank(),
                                               ": ZeroReducer: comparing layouts: ", s.message()));
  }
  for (int r = 0; r < comm_->size(); ++r) {
    if (hashes[2 * r] != mine[0]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", comm_->rank(),
          ": ZeroReducer: the shard layout, wire type or compression differs from rank ", r,
          " (hash ", absl::Hex(mine[0]), " vs ", absl::Hex(hashes[2 * r]), "; wire ", Name(wire),
          " here, ", Name(static_cast<DataType>(hashes[2 * r + 1])), " there; ",
          layout_.num_units(), " units of ", layout_.total(),
          " elements here): every rank must shard the same model and reduce in the same type"));
    }
  }
  return absl::OkStatus();
}

float* ZeroReducer::ParamSlice(int u) {
  if (slice_store_ != nullptr) return nullptr;
  if (options_.stage == 3) return shard_params_.data() + layout_.shard_offset(u);
  return params_->data() + layout_.owned(comm_->rank(), u).begin;
}

float* ZeroReducer::GradSlice(int u) {
  if (options_.stage >= 2) return shard_grads_.data() + layout_.shard_offset(u);
  return grads_->data() + layout_.owned(comm_->rank(), u).begin;
}

absl::Status ZeroReducer::LoadShard() {
  if (options_.stage < 3) return absl::OkStatus();  // the slices are owned ranges of `params`
  for (int u = 0; u < layout_.num_units(); ++u) {
    const float* owned = params_->data() + layout_.owned(comm_->rank(), u).begin;
    if (slice_store_ != nullptr) {
      if (absl::Status s = slice_store_->Store(u, owned); !s.ok()) return s;
    } else {
      std::copy_n(owned, layout_.slice(u), ParamSlice(u));
    }
  }
  // Stage 3 keeps only the slices: the full parameters' pages go back to the kernel.
  params_->Release(0, layout_.total());
  return absl::OkStatus();
}

absl::Status ZeroReducer::MoveSlicesTo(SliceStore* store) {
  if (options_.stage < 3) {
    return absl::FailedPreconditionError("ZeroReducer: only stage 3 keeps parameter slices apart");
  }
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (absl::Status s = store->Store(u, ParamSlice(u)); !s.ok()) return s;
  }
  slice_store_ = store;
  std::vector<float>().swap(shard_params_);
  fetched_.assign(layout_.num_units(), nullptr);
  return absl::OkStatus();
}

void ZeroReducer::BeginBackward(bool sync) {
  std::fill(ready_.begin(), ready_.end(), 0);
  next_to_issue_ = 0;
  next_replica_to_issue_ = 0;
  in_pass_ = true;
  sync_ = sync;
}

float* ZeroReducer::GradientsFor(int u) {
  if (options_.stage < 2) return grads_->data() + layout_.unit(u).begin;
  if (unit_grads_[u] == nullptr) unit_grads_[u] = grad_pool_.Take(layout_.unit(u).length, true);
  return unit_grads_[u];
}

float* ZeroReducer::ParamsOf(int u) {
  if (options_.stage == 3 && gathered_[u] != nullptr) return gathered_[u];
  return params_->data() + layout_.unit(u).begin;
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
  if (sync_ && options_.stage >= 2) {
    IssueReadyUnits();
    ReleaseReducedGradients();
    if (absl::Status s = IssueReplicaReductions(false); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ZeroReducer::IssueReplicaReductions(bool wait) {
  if (options_.replicas == nullptr) return absl::OkStatus();
  const int units = layout_.num_units();
  while (next_replica_to_issue_ < next_to_issue_) {
    const int u = units - 1 - next_replica_to_issue_;
    if (wait) {
      if (absl::Status s = Wait(reductions_[u], "reduce-scatter", u); !s.ok()) return s;
    } else if (!reductions_[u].Test()) {
      return absl::OkStatus();
    }
    // Under a 16-bit wire the slice stays 16-bit: widened only after this all-reduce.
    void* slice = wire_[u] != nullptr ? static_cast<void*>(WireSlice(u)) : GradSlice(u);
    const int replicas = options_.replicas->size();
    bytes_sent_ += 2 * layout_.slice(u) * (replicas - 1) / replicas * SizeOf(options_.wire_type);
    replica_sums_[u] = options_.replicas->AllReduce(slice, slice, layout_.slice(u),
                                                    options_.wire_type, ReduceOp::kAvg);
    ++next_replica_to_issue_;
  }
  return absl::OkStatus();
}

void ZeroReducer::IssueReadyUnits() {
  const int units = layout_.num_units();
  while (next_to_issue_ < units) {
    const int u = units - 1 - next_to_issue_;
    if (!ready_[u]) return;
    if (compressing()) {
      // Runs to completion here, in the fixed unit order every rank issues; stage 1 in place.
      const uint64_t before = compressed_[u]->wire_bytes();
      compressed_results_[u] = compressed_[u]->Run(GradientsFor(u), GradSlice(u));
      bytes_sent_ += compressed_[u]->wire_bytes() - before;
      ++next_to_issue_;
      continue;
    }
    bytes_sent_ += layout_.slice(u) * (layout_.ranks() - 1) * SizeOf(options_.wire_type);
    if (options_.wire_type != DataType::kFloat32) {
      Narrow(u);
      // In place: WireSlice(u) is this rank's block of WireOf(u).
      reductions_[u] = comm_->ReduceScatter(WireOf(u), WireSlice(u), layout_.slice(u),
                                            options_.wire_type, ReduceOp::kAvg);
    } else {
      // Stage 1: in place, GradSlice(u) being this rank's block of GradientsFor(u).
      reductions_[u] = comm_->ReduceScatter(GradientsFor(u), GradSlice(u), layout_.slice(u),
                                            DataType::kFloat32, ReduceOp::kAvg);
    }
    ++next_to_issue_;
  }
}

uint16_t* ZeroReducer::WireOf(int u) { return reinterpret_cast<uint16_t*>(wire_[u]); }

uint16_t* ZeroReducer::WireSlice(int u) {
  return WireOf(u) + static_cast<size_t>(comm_->rank()) * layout_.slice(u);
}

void ZeroReducer::Narrow(int u) {
  const size_t length = layout_.unit(u).length;
  // A copy left by a pass that failed before Finish is reused: it is the same size.
  if (wire_[u] == nullptr) wire_[u] = wire_pool_.Take((length + 1) / 2, false);
  if (options_.wire_type == DataType::kBFloat16) {
    FloatToBFloat16(GradientsFor(u), WireOf(u), length);
  } else {
    FloatToHalf(GradientsFor(u), WireOf(u), length);
  }
  // Stages 2-3: the rounded copy is what travels; the full gradient is not needed any more.
  if (unit_grads_[u] != nullptr) {
    grad_pool_.Give(unit_grads_[u], length);
    unit_grads_[u] = nullptr;
  }
}

void ZeroReducer::Widen(int u) {
  if (options_.wire_type == DataType::kBFloat16) {
    BFloat16ToFloat(WireSlice(u), GradSlice(u), layout_.slice(u));
  } else {
    HalfToFloat(WireSlice(u), GradSlice(u), layout_.slice(u));
  }
  wire_pool_.Give(wire_[u], (layout_.unit(u).length + 1) / 2);
  wire_[u] = nullptr;
}

bool ZeroReducer::Reduced(int u) const {
  const int order = layout_.num_units() - 1 - u;  // units are issued last first
  if (options_.replicas == nullptr) return order < next_to_issue_ && reductions_[u].Test();
  return order < next_replica_to_issue_ && replica_sums_[u].Test();
}

void ZeroReducer::ReleaseReducedGradients() {
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (unit_grads_[u] == nullptr || !ready_[u] || !reductions_[u].Test()) continue;
    // A unit not yet issued has an empty Work, which tests done: only release issued ones.
    if (layout_.num_units() - 1 - u >= next_to_issue_) continue;
    grad_pool_.Give(unit_grads_[u], layout_.unit(u).length);
    unit_grads_[u] = nullptr;
  }
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (wire_[u] != nullptr && Reduced(u)) Widen(u);
  }
}

absl::Status ZeroReducer::Wait(Work& work, const char* what, int u) {
  const absl::Time start = absl::Now();
  absl::Status s = work.Wait(options_.timeout);
  waited_ += absl::Now() - start;
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("rank ", comm_->rank(), ": ZeroReducer: ", what,
                                             " of unit ", layout_.unit(u).name, ": ", s.message()));
}

absl::Status ZeroReducer::Finish() {
  if (!in_pass_) return absl::FailedPreconditionError("ZeroReducer::Finish without BeginBackward");
  in_pass_ = false;
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (!ready_[u]) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", comm_->rank(), ": ZeroReducer: unit ", layout_.unit(u).name,
                       " was never marked ready in this backward pass"));
    }
  }
  if (!sync_) return absl::OkStatus();
  IssueReadyUnits();
  absl::Status first = IssueReplicaReductions(true);
  // Every one is waited for, even after a failure: their buffers must outlive them.
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    if (compressing()) {
      // Already run to completion when issued.
      absl::Status s = std::exchange(compressed_results_[u], absl::OkStatus());
      if (!s.ok() && first.ok()) {
        first =
            absl::Status(s.code(), absl::StrCat("ZeroReducer: compressed reduce-scatter of unit ",
                                                layout_.unit(u).name, ": ", s.message()));
      }
      continue;
    }
    absl::Status s = Wait(reductions_[u], "reduce-scatter", u);
    if (first.ok()) first = s;
    if (options_.replicas == nullptr) continue;
    s = Wait(replica_sums_[u], "all-reduce across replicas", u);
    if (first.ok()) first = s;
  }
  // Stages 2-3: the full gradients go back. 16-bit wire: every slice whose collectives are over
  // is widened (a failed one's garbage, with the error returned); one still running after a
  // timeout keeps its copy.
  ReleaseReducedGradients();
  return first;
}

absl::StatusOr<Work> ZeroReducer::GatherUnit(int u, float* into) {
  const float* slice = ParamSlice(u);
  if (slice_store_ != nullptr) {
    float* fetched = slice_pool_.Take(layout_.slice(u), false);
    if (absl::Status s = slice_store_->Fetch(u, fetched); !s.ok()) {
      slice_pool_.Give(fetched, layout_.slice(u));
      return s;
    }
    fetched_[u] = fetched;
    slice = fetched;
  }
  bytes_sent_ += layout_.slice(u) * (layout_.ranks() - 1) * sizeof(float);
  // In place when `into` is unit u's range of `params` under stages 1-2.
  return comm_->AllGather(slice, into, layout_.slice(u), DataType::kFloat32);
}

absl::Status ZeroReducer::WaitGather(int u) {
  absl::Status s = Wait(gathers_[u], "all-gather of the parameters", u);
  // The fetched slice may only go back once the gather from it is over.
  if (slice_store_ != nullptr && fetched_[u] != nullptr && gathers_[u].Test()) {
    slice_pool_.Give(fetched_[u], layout_.slice(u));
    fetched_[u] = nullptr;
  }
  return s;
}

absl::Status ZeroReducer::GatherParams() {
  if (options_.stage == 3) {
    ReleaseAllParams();
    return absl::OkStatus();
  }
  return GatherAllParams();
}

absl::Status ZeroReducer::GatherAllParams() {
  // One unit at a time when the slices are fetched (each needs its own fetch buffer).
  std::vector<Work> works(layout_.num_units());
  absl::Status first;
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    absl::StatusOr<Work> work = GatherUnit(u, params_->data() + layout_.unit(u).begin);
    if (!work.ok()) return work.status();
    works[u] = *std::move(work);
    if (slice_store_ != nullptr) {
      std::swap(gathers_[u], works[u]);
      if (absl::Status s = WaitGather(u); first.ok()) first = s;
      std::swap(gathers_[u], works[u]);
    }
  }
  if (slice_store_ != nullptr) return first;
  for (int u = layout_.num_units() - 1; u >= 0; --u) {
    absl::Status s = Wait(works[u], "all-gather of the parameters", u);
    if (first.ok()) first = s;
  }
  return first;
}

void ZeroReducer::ReleaseAllParams() {
  for (int u = 0; u < layout_.num_units(); ++u) ReleaseParams(u);
}

absl::Status ZeroReducer::Acquire(int u) {
  if (options_.stage < 3) return absl::OkStatus();
  if (absl::Status s = std::exchange(prefetch_error_, absl::OkStatus()); !s.ok()) return s;
  if (gathered_[u] == nullptr) {
    gathered_[u] = param_pool_.Take(layout_.unit(u).length, false);
    absl::StatusOr<Work> work = GatherUnit(u, gathered_[u]);
    if (!work.ok()) {
      param_pool_.Give(gathered_[u], layout_.unit(u).length);
      gathered_[u] = nullptr;
      return work.status();
    }
    gathers_[u] = *std::move(work);
  }
  return WaitGather(u);
}

void ZeroReducer::Prefetch(int u) {
  if (options_.stage < 3 || u < 0 || u >= layout_.num_units() || gathered_[u] != nullptr) return;
  const size_t bytes = layout_.unit(u).length * sizeof(float);
  if (param_pool_.live_bytes() + bytes > options_.max_gathered_bytes) return;
  gathered_[u] = param_pool_.Take(layout_.unit(u).length, false);
  absl::StatusOr<Work> work = GatherUnit(u, gathered_[u]);
  if (!work.ok()) {
    param_pool_.Give(gathered_[u], layout_.unit(u).length);
    gathered_[u] = nullptr;
    if (prefetch_error_.ok()) prefetch_error_ = work.status();
    return;
  }
  gathers_[u] = *std::move(work);
}

void ZeroReducer::ReleaseParams(int u) {
  if (options_.stage < 3 || gathered_[u] == nullptr) return;
  // The buffer may only go back once the gather into it is over.
  WaitGather(u).IgnoreError();
  param_pool_.Give(gathered_[u], layout_.unit(u).length);
  gathered_[u] = nullptr;
}

std::vector<CompressedReduceScatter*> ZeroReducer::Compressors() const {
  std::vector<CompressedReduceScatter*> all;
  for (const auto& c : compressed_) all.push_back(c.get());
  return all;
}

std::vector<float> ZeroReducer::compression_errors() const { return JoinErrors(Compressors()); }

absl::Status ZeroReducer::RestoreCompressionErrors(const std::vector<float>& errors) {
  return SplitErrors(Compressors(), errors, "ZeroReducer");
}

absl::Duration ZeroReducer::TakeWait() { return std::exchange(waited_, absl::ZeroDuration()); }

}  // namespace weft::shard
