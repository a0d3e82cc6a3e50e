#include "data_parallel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "weft/kernels/precision.h"
#include "weft/shard/shard_layout.h"

namespace weft::trainer {
namespace {

constexpr absl::Duration kCommTimeout = absl::Seconds(120);

// The type gradients are reduced in over the data-parallel ranks (grad_reduce_dtype).
DataType WireType(const Config& config) {
  return config.grad_reduce_dtype == "bf16"   ? DataType::kBFloat16
         : config.grad_reduce_dtype == "fp16" ? DataType::kFloat16
                                              : DataType::kFloat32;
}

// The codec compression= names (none and powersgd: no codec).
std::optional<CompressionOptions> Compression(const Config& config) {
  const std::optional<Codec> codec = ParseCodec(config.compression);
  if (!codec.has_value()) return std::nullopt;
  CompressionOptions compression;
  compression.codec = *codec;
  compression.topk_ratio = config.topk_ratio;
  compression.timeout = kCommTimeout;
  return compression;
}

}  // namespace

std::vector<int> DataParallel::ShardGroup(const Config& config, const Communicator* comm) {
  if (comm == nullptr) return {0};
  if (config.shard_group == kShardGroupNode) return comm->NodeRanks();
  const int k = config.shard_group > 0 ? config.shard_group : comm->size();
  std::vector<int> group;
  for (int r = comm->rank() / k * k; r < (comm->rank() / k + 1) * k; ++r) group.push_back(r);
  return group;
}

size_t DataParallel::PadQuantum(const Config& config, const Communicator* comm) {
  if (config.zero == 0 || comm == nullptr) return 1;
  return ShardGroup(config, comm).size() * shard::ShardLayout::kAlign;
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(const Config& config,
                                                                   Communicator* comm, Gpt* model,
                                                                   Communicator* stages) {
  std::unique_ptr<DataParallel> dp(new DataParallel(config, comm, model, stages));
  const AdamWSettings settings{config.beta1, config.beta2, config.eps, config.weight_decay};
  const ParamLayout& layout = model->layout();
  if (comm != nullptr && config.zero > 0) {
    dp->shard_comm_ = comm;
    shard::ZeroOptions options;
    const std::vector<int> group = ShardGroup(config, comm);
    const int k = static_cast<int>(group.size());
    if (k < comm->size()) {
      // Groups must be alike: their slices are replicas of each other.
      int64_t sizes[2] = {k, -k};
      absl::Status s =
          comm->AllReduce(sizes, sizes, 2, DataType::kInt64, ReduceOp::kMax).Wait(kCommTimeout);
      if (!s.ok()) return s;
      if (sizes[0] != -sizes[1]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", comm->rank(), ": shard_group=node: the nodes hold ", -sizes[1], " to ",
            sizes[0], " ranks; hybrid sharding needs equal groups (set shard_group to a number)"));
      }
      const int index =
          static_cast<int>(std::find(group.begin(), group.end(), comm->rank()) - group.begin());
      absl::StatusOr<std::unique_ptr<Communicator>> shards =
          comm->Split(group.front(), comm->rank());
      if (!shards.ok()) return shards.status();
      absl::StatusOr<std::unique_ptr<Communicator>> replicas = comm->Split(index, comm->rank());
      if (!replicas.ok()) return replicas.status();
      dp->shard_group_ = *std::move(shards);
      dp->replicas_ = *std::move(replicas);
      dp->shard_comm_ = dp->shard_group_.get();
      options.replicas = dp->replicas_.get();
    }
    Communicator* shard_comm = dp->shard_comm_;
    std::vector<shard::Unit> units;
    for (const UnitView& u : layout.units()) units.push_back({u.name, u.offset, u.size});
    absl::StatusOr<shard::ShardLayout> shards =
        shard::ShardLayout::Create(std::move(units), shard_comm->size());
    if (!shards.ok()) return shards.status();
    dp->adam_ = std::make_unique<AdamW>(layout, settings, shards->owned(shard_comm->rank()));
    options.stage = config.zero;
    options.wire_type = WireType(config);
    options.max_gathered_bytes = static_cast<size_t>(config.max_gathered_mb * (1 << 20));
    options.timeout = kCommTimeout;
    options.compression = Compression(config);
    absl::StatusOr<std::unique_ptr<shard::ZeroReducer>> zero = shard::ZeroReducer::Create(
        shard_comm, *std::move(shards), &model->grad_buffer(), &model->param_buffer(), options);
    if (!zero.ok()) return zero.status();
    dp->zero_ = std::move(*zero);
    if (absl::Status s = dp->zero_->LoadShard(); !s.ok()) return s;
    if (config.zero >= 2) model->set_hooks(dp.get());
    return dp;
  }
  dp->adam_ = std::make_unique<AdamW>(layout, settings);
  if (comm == nullptr) return dp;
  if (config.compression == "powersgd") {
    absl::StatusOr<std::unique_ptr<PowerSgd>> powersgd =
        PowerSgd::Create(comm, layout, model->grads(), config.compression_rank, kCommTimeout);
    if (!powersgd.ok()) return powersgd.status();
    dp->powersgd_ = *std::move(powersgd);
    return dp;
  }
  std::vector<shard::Gradient> grads;
  for (const TensorView& t : layout.tensors()) {
    grads.push_back({t.name, model->grads() + t.offset, t.size});
  }
  shard::GradReducerOptions options;
  options.bucket_cap_bytes = static_cast<size_t>(config.bucket_cap_mb * (1 << 20));
  options.first_bucket_cap_bytes = static_cast<size_t>(config.first_bucket_mb * (1 << 20));
  options.timeout = kCommTimeout;
  options.wire_type = WireType(config);
  options.compression = Compression(config);
  absl::StatusOr<std::unique_ptr<shard::GradReducer>> reducer =
      shard::GradReducer::Create(comm, std::move(grads), options);
  if (!reducer.ok()) return reducer.status();
  dp->reducer_ = std::move(*reducer);
  return dp;
}

absl::Status DataParallel::ParamsLoaded() {
  return zero_ != nullptr ? zero_->LoadShard() : absl::OkStatus();
}

void DataParallel::ZeroGrads() {
  // Stages 2-3 hand each unit a zeroed gradient buffer when backward first reaches it.
  if (zero_ == nullptr || zero_->stage() < 2) model_->ZeroGrads();
}

void DataParallel::BeginBackward(bool sync) {
  sync_ = sync;
  if (reducer_ != nullptr) reducer_->BeginBackward(sync);
  if (zero_ != nullptr) {
    zero_->BeginBackward(sync);
    unit_pending_.clear();
    for (const UnitView& u : model_->layout().units()) {
      unit_pending_.push_back(u.end_tensor - u.first_tensor);
    }
  }
}

void DataParallel::TensorReady(int tensor) {
  if (!error_.ok()) return;
  if (reducer_ != nullptr) error_ = reducer_->MarkReady(static_cast<size_t>(tensor));
  if (zero_ != nullptr) {
    const int unit = model_->layout().tensor(tensor).unit;
    if (--unit_pending_[unit] == 0) error_ = zero_->MarkUnitReady(unit);
  }
}

int DataParallel::NextUnit(int unit, Pass pass) const {
  const int final_norm = static_cast<int>(model_->layout().units().size()) - 1;
  if (pass == Pass::kForward) return unit < final_norm ? unit + 1 : -1;
  if (unit == 0) return final_norm;
  return unit > 1 ? unit - 1 : -1;  // the embeddings are still gathered for the encoder
}

void DataParallel::Before(int unit, Pass pass, bool reads_params) {
  if (zero_->stage() == 3 && reads_params) {
    if (absl::Status s = zero_->Acquire(unit); !s.ok() && error_.ok()) error_ = s;
    if (config_.prefetch == "true") zero_->Prefetch(NextUnit(unit, pass));
  }
  float* grads = pass == Pass::kBackward ? zero_->GradientsFor(unit)
                                         : model_->grads() + model_->layout().units()[unit].offset;
  model_->SetUnitStorage(unit, zero_->ParamsOf(unit), grads);
}

void DataParallel::After(int unit, Pass /*pass*/) {
  if (zero_->stage() == 3 && unit != 0) zero_->ReleaseParams(unit);
}

absl::Status DataParallel::TakeError() { return std::exchange(error_, absl::OkStatus()); }

uint64_t DataParallel::TakeBytesSent() {
  const uint64_t tp = tp_.TakeBytesSent();
  if (zero_ != nullptr) {
    const uint64_t total = zero_->bytes_sent();
    return tp + total - std::exchange(bytes_sent_, total);
  }
  return tp + std::exchange(pending_bytes_, 0);
}

absl::Status DataParallel::FinishBackward(absl::Duration* comm_wait) {
  if (absl::Status s = TakeError(); !s.ok()) return s;
  if (powersgd_ != nullptr && sync_) {
    // After backward, not overlapped: PowerSGD needs whole matrices. Warm-up steps average the
    // whole gradient buffer exactly.
    const absl::Time start = absl::Now();
    absl::Status s;
    if (compression_active_) {
      const uint64_t before = powersgd_->wire_bytes();
      s = powersgd_->Reduce();
      pending_bytes_ += powersgd_->wire_bytes() - before;
    } else {
      const int n = comm_->size();
      const size_t count = model_->num_params();
      pending_bytes_ += 2 * count * sizeof(float) * (n - 1) / n;
      s = comm_
              ->AllReduce(model_->grads(), model_->grads(), count, DataType::kFloat32,
                          ReduceOp::kAvg)
              .Wait(kCommTimeout);
    }
    *comm_wait += absl::Now() - start;
    return s;
  }
  if (reducer_ != nullptr && reducer_->compressing()) {
    const uint64_t total = reducer_->compressed_wire_bytes();
    pending_bytes_ += total - std::exchange(compressed_seen_, total);
  } else if (reducer_ != nullptr && reducer_->buckets_issued() > 0) {
    const int n = comm_->size();
    for (int b = 0; b < reducer_->plan().num_buckets(); ++b) {
      // Bucket bytes count fp32 gradients; the wire may carry 16-bit ones.
      const uint64_t wire =
          reducer_->plan().bucket(b).bytes / sizeof(float) * SizeOf(reducer_->wire_type());
      pending_bytes_ += 2 * wire * (n - 1) / n;
    }
  }
  if (reducer_ != nullptr) {
    if (absl::Status s = reducer_->Finish(kCommTimeout); !s.ok()) return s;
    *comm_wait += reducer_->last_wait();
  }
  if (zero_ != nullptr) {
    absl::Status s = zero_->Finish();
    *comm_wait += zero_->TakeWait();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::pair<shard::Range, float*>> DataParallel::GradientSpans() {
  if (zero_ == nullptr) return {{{0, model_->num_params()}, model_->grads()}};
  const shard::ShardLayout& shards = zero_->layout();
  std::vector<std::pair<shard::Range, float*>> spans;
  for (int u = 0; u < shards.num_units(); ++u) {
    spans.push_back({shards.owned(shard_comm_->rank(), u), zero_->GradSlice(u)});
  }
  return spans;
}

absl::Status DataParallel::SumPartialGradients(
    const std::vector<std::pair<shard::Range, float*>>& spans) {
  std::vector<std::pair<float*, size_t>> parts;
  size_t total = 0;
  for (const auto& [range, data] : spans) {
    for (const TensorView& view : model_->layout().tensors()) {
      const size_t first = std::max(range.begin, view.offset);
      const size_t last = std::min(range.begin + range.length, view.offset + view.size);
      if (!view.partial_gradient || first >= last) continue;
      parts.push_back({data + (first - range.begin), last - first});
      total += last - first;
    }
  }
  if (parts.empty()) return absl::OkStatus();
  std::vector<float> staged;
  staged.reserve(total);
  for (const auto& [data, n] : parts) staged.insert(staged.end(), data, data + n);
  tp_.ReduceFromRegion(staged.data(), total);
  if (absl::Status s = tp_.TakeError(); !s.ok()) return s;
  const float* from = staged.data();
  for (const auto& [data, n] : parts) {
    std::copy(from, from + n, data);
    from += n;
  }
  return absl::OkStatus();
}

double DataParallel::CountedSquares(const std::pair<shard::Range, float*>& span) const {
  const auto& [range, data] = span;
  const int head = model_->head_tensor();
  if (tp_.rank() == 0 && (head < 0 || !model_->layout().tensor(head).tied_copy)) {
    return SumOfSquares(data, range.length);
  }
  double squares = 0.0;
  for (const TensorView& view : model_->layout().tensors()) {
    const size_t first = std::max(range.begin, view.offset);
    const size_t last = std::min(range.begin + range.length, view.offset + view.size);
    const bool counted = !view.tied_copy && (tp_.rank() == 0 || !view.replicated);
    if (counted && first < last) {
      squares += SumOfSquares(data + (first - range.begin), last - first);
    }
  }
  return squares;
}

std::vector<float> DataParallel::compression_errors() const {
  if (powersgd_ != nullptr) return powersgd_->state();
  if (zero_ != nullptr) return zero_->compression_errors();
  return reducer_ != nullptr ? reducer_->compression_errors() : std::vector<float>();
}

absl::Status DataParallel::RestoreCompressionErrors(const std::vector<float>& errors) {
  if (powersgd_ != nullptr) return powersgd_->Restore(errors);
  if (zero_ != nullptr) return zero_->RestoreCompressionErrors(errors);
  return reducer_ != nullptr ? reducer_->RestoreCompressionErrors(errors) : absl::OkStatus();
}

bool DataParallel::GradientsFinite() {
  for (const auto& [range, data] : GradientSpans()) {
    if (!AllFinite(data, range.length)) return false;
  }
  return true;
}

absl::Status DataParallel::Update(double lr, double* grad_norm, absl::Duration* comm_wait,
                                  float unscale) {
  const std::vector<std::pair<shard::Range, float*>> spans = GradientSpans();
  const absl::Time start = absl::Now();
  if (absl::Status s = SumPartialGradients(spans); !s.ok()) return s;
  double squares = 0.0;
  for (const auto& span : spans) squares += CountedSquares(span);
  // Over one shard group (the replicas hold the same slices), then over the tensor-parallel
  // group's parts and the pipeline's stages.
  if (zero_ != nullptr) {
    absl::Status s =
        shard_comm_->AllReduce(&squares, &squares, 1, DataType::kFloat64, ReduceOp::kSum)
            .Wait(kCommTimeout);
    if (!s.ok()) return s;
  }
  for (Communicator* group : {tp_.comm(), stages_}) {
    if (group == nullptr) continue;
    absl::Status s = group->AllReduce(&squares, &squares, 1, DataType::kFloat64, ReduceOp::kSum)
                         .Wait(kCommTimeout);
    if (!s.ok()) return s;
  }
  *comm_wait += absl::Now() - start;
  *grad_norm = std::sqrt(squares) * unscale;
  std::vector<float*> params;
  std::vector<const float*> grads;
  const double clip = config_.grad_clip;
  const float factor =
      unscale *
      (clip > 0 && *grad_norm > clip ? static_cast<float>(clip / (*grad_norm + 1e-6)) : 1);
  for (const auto& [range, data] : spans) {
    if (unscale == 1) {
      ClipToNorm(data, range.length, *grad_norm, clip);
    } else {
      Scale(data, range.length, factor);
    }
    grads.push_back(data);
  }
  const absl::Time optimizer_start = absl::Now();
  if (zero_ == nullptr) {
    absl::Status s = adam_->Step({model_->params()}, grads, lr);
    optimizer_time_ = absl::Now() - optimizer_start;
    return s;
  }
  for (int u = 0; u < zero_->layout().num_units(); ++u) params.push_back(zero_->ParamSlice(u));
  absl::Status stepped = adam_->Step(params, grads, lr);
  optimizer_time_ = absl::Now() - optimizer_start;
  if (!stepped.ok()) return stepped;
  absl::Status s = zero_->GatherParams();
  *comm_wait += zero_->TakeWait();
  return s;
}

absl::Status DataParallel::GatherForInference() {
  if (zero_ == nullptr || zero_->stage() < 3) return absl::OkStatus();
  model_->set_hooks(nullptr);
  model_->ResetUnitStorage();
  absl::Status s = zero_->GatherAllParams();
  zero_->TakeWait();
  return s;
}

DataParallel::MemoryFigures DataParallel::Memory() const {
  const size_t flat = model_->num_params() * sizeof(float);
  MemoryFigures m;
  m.optimizer = adam_->offloaded() ? 0 : 2 * adam_->owned_size() * sizeof(float);
  if (adam_->offloaded()) m.offload_staging = offload_staging_bytes_;
  if (zero_ == nullptr) {
    m.params = m.grads = flat;
    m.working = model_->working_param_bytes();
    if (reducer_ != nullptr) m.buckets = reducer_->staging_bytes();
    return m;
  }
  const size_t shard = zero_->layout().shard_size() * sizeof(float);
  m.params = zero_->stage() <= 2 ? flat : slices_ != nullptr ? 0 : shard;  // full, slices, none
  m.grads = zero_->stage() == 1 ? flat : shard;  // full gradients, or their slices
  m.gathered = zero_->peak_gathered_bytes();
  m.working = model_->working_param_bytes();
  m.buckets = zero_->peak_gradient_bytes() + zero_->peak_wire_bytes();
  return m;
}

size_t DataParallel::state_bytes() const {
  const MemoryFigures m = Memory();
  return m.params + m.grads + m.optimizer;
}

size_t DataParallel::buffer_bytes() const {
  const MemoryFigures m = Memory();
  return m.gathered + m.buckets + m.working + m.offload_staging;
}

std::string DataParallel::MemoryReport() const {
  const double mib = 1.0 / (1 << 20);
  const double psi = static_cast<double>(model_->layout().parameters());
  const int n = shard_comm_ != nullptr ? shard_comm_->size() : comm_ == nullptr ? 1 : comm_->size();
  const int stage = zero_ != nullptr ? config_.zero : 0;
  const double model = 4 * psi * (stage >= 3 ? 1.0 / n : 1.0) +
                       4 * psi * (stage >= 2 ? 1.0 / n : 1.0) +
                       8 * psi * (stage >= 1 ? 1.0 / n : 1.0);
  const MemoryFigures m = Memory();
  return absl::StrFormat(
      "memory per rank (zero=%d, %s): parameters %.2f + gradients %.2f + "
      "optimizer %.2f = state %.2f MiB, the model's %.2f MiB (ratio %.3f); peaks so far: gathered "
      "parameters %.2f MiB, gradient buckets %.2f MiB",
      stage,
      stage == 0 ? std::string("not sharded")
                 : absl::StrCat("sharded over ", n, " rank", n == 1 ? "" : "s"),
      m.params * mib, m.grads * mib, m.optimizer * mib, state_bytes() * mib, model * mib,
      static_cast<double>(state_bytes()) / model, m.gathered * mib, m.buckets * mib);
}

}  // namespace weft::trainer
