#include "data_parallel.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "weft/shard/shard_layout.h"

namespace weft::trainer {
namespace {

constexpr absl::Duration kCommTimeout = absl::Seconds(120);

}  // namespace

size_t DataParallel::PadQuantum(const Config& config, int world) {
  if (config.zero == 0 || world == 1) return 1;
  const int shards = config.shard_group > 0 ? config.shard_group : world;
  return static_cast<size_t>(shards) * shard::ShardLayout::kAlign;
}

DataParallel::DataParallel(const Config& config, Communicator* comm, Gpt* model)
    : config_(config), comm_(comm), model_(model) {}

DataParallel::~DataParallel() {
  if (model_ != nullptr) model_->set_hooks(nullptr);
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(const Config& config,
                                                                   Communicator* comm, Gpt* model) {
  std::unique_ptr<DataParallel> dp(new DataParallel(config, comm, model));
  const AdamWSettings settings{config.beta1, config.beta2, config.eps, config.weight_decay};
  const ParamLayout& layout = model->layout();
  if (comm != nullptr && config.zero > 0) {
    dp->shard_comm_ = comm;
    shard::ZeroOptions options;
    if (config.shard_group > 0 && config.shard_group < comm->size()) {
      const int k = config.shard_group;
      absl::StatusOr<std::unique_ptr<Communicator>> group = comm->Split(comm->rank() / k, 0);
      if (!group.ok()) return group.status();
      absl::StatusOr<std::unique_ptr<Communicator>> replicas = comm->Split(comm->rank() % k, 0);
      if (!replicas.ok()) return replicas.status();
      dp->shard_group_ = *std::move(group);
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
    options.max_gathered_bytes = static_cast<size_t>(config.max_gathered_mb * (1 << 20));
    options.timeout = kCommTimeout;
    absl::StatusOr<std::unique_ptr<shard::ZeroReducer>> zero = shard::ZeroReducer::Create(
        shard_comm, *std::move(shards), &model->grad_buffer(), &model->param_buffer(), options);
    if (!zero.ok()) return zero.status();
    dp->zero_ = std::move(*zero);
    dp->zero_->LoadShard();
    if (config.zero >= 2) model->set_hooks(dp.get());
    return dp;
  }
  dp->adam_ = std::make_unique<AdamW>(layout, settings);
  if (comm == nullptr) return dp;
  std::vector<shard::Gradient> grads;
  for (const TensorView& t : layout.tensors()) {
    grads.push_back({t.name, model->grads() + t.offset, t.size});
  }
  shard::GradReducerOptions options;
  options.bucket_cap_bytes = static_cast<size_t>(config.bucket_cap_mb * (1 << 20));
  options.first_bucket_cap_bytes = static_cast<size_t>(config.first_bucket_mb * (1 << 20));
  options.timeout = kCommTimeout;
  absl::StatusOr<std::unique_ptr<shard::GradReducer>> reducer =
      shard::GradReducer::Create(comm, std::move(grads), options);
  if (!reducer.ok()) return reducer.status();
  dp->reducer_ = std::move(*reducer);
  return dp;
}

void DataParallel::ParamsLoaded() {
  if (zero_ != nullptr) zero_->LoadShard();
}

void DataParallel::ZeroGrads() {
  // Stages 2-3 hand each unit a zeroed gradient buffer when backward first reaches it.
  if (zero_ == nullptr || zero_->stage() < 2) model_->ZeroGrads();
}

void DataParallel::BeginBackward(bool sync) {
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
  if (zero_ != nullptr) {
    const uint64_t total = zero_->bytes_sent();
    return total - std::exchange(bytes_sent_, total);
  }
  return std::exchange(pending_bytes_, 0);
}

absl::Status DataParallel::FinishBackward(absl::Duration* comm_wait) {
  if (absl::Status s = TakeError(); !s.ok()) return s;
  if (reducer_ != nullptr && reducer_->buckets_issued() > 0) {
    const int n = comm_->size();
    for (int b = 0; b < reducer_->plan().num_buckets(); ++b) {
      pending_bytes_ += 2 * reducer_->plan().bucket(b).bytes * (n - 1) / n;
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

absl::Status DataParallel::Update(double lr, double* grad_norm, absl::Duration* comm_wait) {
  if (zero_ == nullptr) {
    *grad_norm = ClipByGlobalNorm(model_->grads(), model_->num_params(), config_.grad_clip);
    adam_->Step({model_->params()}, {model_->grads()}, lr);
    return absl::OkStatus();
  }
  const shard::ShardLayout& shards = zero_->layout();
  double squares = 0.0;
  for (int u = 0; u < shards.num_units(); ++u) {
    squares += SumOfSquares(zero_->GradSlice(u), shards.slice(u));
  }
  const absl::Time start = absl::Now();
  // Over one shard group: the replicas hold the same slices.
  absl::Status s = shard_comm_->AllReduce(&squares, &squares, 1, DataType::kFloat64, ReduceOp::kSum)
                       .Wait(kCommTimeout);
  *comm_wait += absl::Now() - start;
  if (!s.ok()) return s;
  *grad_norm = std::sqrt(squares);
  std::vector<float*> params;
  std::vector<const float*> grads;
  for (int u = 0; u < shards.num_units(); ++u) {
    ClipToNorm(zero_->GradSlice(u), shards.slice(u), *grad_norm, config_.grad_clip);
    params.push_back(zero_->ParamSlice(u));
    grads.push_back(zero_->GradSlice(u));
  }
  adam_->Step(params, grads, lr);
  s = zero_->GatherParams();
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

absl::Status DataParallel::FullState(std::vector<float>* params, std::vector<float>* m,
                                     std::vector<float>* v) {
  if (zero_ == nullptr) {
    params->assign(model_->params(), model_->params() + model_->num_params());
    *m = adam_->m();
    *v = adam_->v();
    return absl::OkStatus();
  }
  for (std::vector<float>* full : {params, m, v}) full->assign(model_->num_params(), 0.0f);
  const shard::ShardLayout& shards = zero_->layout();
  absl::Status s;
  if (zero_->stage() < 3) {
    // The full parameters are resident and current after GatherParams.
    std::copy_n(model_->params(), model_->num_params(), params->data());
  } else {
    std::vector<float> slices(shards.shard_size());
    for (int u = 0; u < shards.num_units(); ++u) {
      std::copy_n(zero_->ParamSlice(u), shards.slice(u), slices.data() + shards.shard_offset(u));
    }
    s = zero_->GatherShards(slices.data(), params->data());
  }
  if (s.ok()) s = zero_->GatherShards(adam_->m().data(), m->data());
  if (s.ok()) s = zero_->GatherShards(adam_->v().data(), v->data());
  zero_->TakeWait();
  return s;
}

void DataParallel::LoadMoments(const std::vector<float>& m, const std::vector<float>& v,
                               int64_t step) {
  adam_->set_step(step);
  if (zero_ == nullptr) {
    adam_->m() = m;
    adam_->v() = v;
    return;
  }
  const shard::ShardLayout& shards = zero_->layout();
  for (int u = 0; u < shards.num_units(); ++u) {
    const shard::Range owned = shards.owned(shard_comm_->rank(), u);
    std::copy_n(m.data() + owned.begin, owned.length, adam_->m().data() + shards.shard_offset(u));
    std::copy_n(v.data() + owned.begin, owned.length, adam_->v().data() + shards.shard_offset(u));
  }
}

size_t DataParallel::state_bytes() const {
  const size_t flat = model_->num_params();
  if (zero_ == nullptr) return (2 * flat + 2 * adam_->owned_size()) * sizeof(float);
  const size_t shard = zero_->layout().shard_size();
  size_t floats = 2 * adam_->owned_size();       // the moments
  floats += zero_->stage() <= 2 ? flat : shard;  // full parameters, or their slices
  floats += zero_->stage() == 1 ? flat : shard;  // full gradients, or their slices
  return floats * sizeof(float);
}

size_t DataParallel::buffer_bytes() const {
  if (zero_ != nullptr) return zero_->peak_gradient_bytes() + zero_->peak_gathered_bytes();
  if (reducer_ == nullptr) return 0;
  size_t bytes = 0;
  for (int b = 0; b < reducer_->plan().num_buckets(); ++b) {
    if (reducer_->plan().bucket(b).contiguous == nullptr) bytes += reducer_->plan().bucket(b).bytes;
  }
  return bytes;
}

std::string DataParallel::MemoryReport() const {
  const double mib = 1.0 / (1 << 20);
  const double psi = static_cast<double>(model_->layout().parameters());
  const int n = shard_comm_ != nullptr ? shard_comm_->size() : comm_ == nullptr ? 1 : comm_->size();
  const int stage = zero_ != nullptr ? config_.zero : 0;
  const double model = 4 * psi * (stage >= 3 ? 1.0 / n : 1.0) +
                       4 * psi * (stage >= 2 ? 1.0 / n : 1.0) +
                       8 * psi * (stage >= 1 ? 1.0 / n : 1.0);
  return absl::StrFormat(
      "memory per rank (zero=%d, sharded over %d rank%s): state %.2f MiB (optimizer moments %.2f "
      "MiB) against "
      "the model's %.2f MiB; buffers so far %.2f MiB",
      stage, n, n == 1 ? "" : "s", state_bytes() * mib,
      2 * adam_->owned_size() * sizeof(float) * mib, model * mib, buffer_bytes() * mib);
}

}  // namespace weft::trainer
