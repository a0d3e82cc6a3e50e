#include "data_parallel.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "weft/shard/shard_layout.h"

namespace weft::trainer {
namespace {

constexpr absl::Duration kCommTimeout = absl::Seconds(120);

}  // namespace

size_t DataParallel::PadQuantum(const Config& config, int world) {
  return config.zero > 0 && world > 1 ? static_cast<size_t>(world) * shard::ShardLayout::kAlign : 1;
}

DataParallel::DataParallel(const Config& config, Communicator* comm, Gpt* model)
    : config_(config), comm_(comm), model_(model) {}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(const Config& config,
                                                                   Communicator* comm, Gpt* model) {
  std::unique_ptr<DataParallel> dp(new DataParallel(config, comm, model));
  const AdamWSettings settings{config.beta1, config.beta2, config.eps, config.weight_decay};
  const ParamLayout& layout = model->layout();
  if (comm != nullptr && config.zero > 0) {
    std::vector<shard::Unit> units;
    for (const UnitView& u : layout.units()) units.push_back({u.name, u.offset, u.size});
    absl::StatusOr<shard::ShardLayout> shards =
        shard::ShardLayout::Create(std::move(units), comm->size());
    if (!shards.ok()) return shards.status();
    dp->adam_ = std::make_unique<AdamW>(layout, settings, shards->owned(comm->rank()));
    shard::ZeroOptions options;
    options.stage = config.zero;
    options.timeout = kCommTimeout;
    absl::StatusOr<std::unique_ptr<shard::ZeroReducer>> zero = shard::ZeroReducer::Create(
        comm, *std::move(shards), model->grads(), model->params(), options);
    if (!zero.ok()) return zero.status();
    dp->zero_ = std::move(*zero);
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

void DataParallel::BeginBackward(bool sync) {
  ready_status_ = absl::OkStatus();
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
  if (!ready_status_.ok()) return;
  if (reducer_ != nullptr) ready_status_ = reducer_->MarkReady(static_cast<size_t>(tensor));
  if (zero_ != nullptr) {
    const int unit = model_->layout().tensor(tensor).unit;
    if (--unit_pending_[unit] == 0) ready_status_ = zero_->MarkUnitReady(unit);
  }
}

absl::Status DataParallel::FinishBackward(absl::Duration* comm_wait) {
  if (!ready_status_.ok()) return ready_status_;
  if (reducer_ != nullptr) {
    if (absl::Status s = reducer_->Finish(kCommTimeout); !s.ok()) return s;
    *comm_wait += reducer_->last_wait();
  }
  if (zero_ != nullptr) {
    if (absl::Status s = zero_->Finish(kCommTimeout); !s.ok()) return s;
    *comm_wait += zero_->last_wait();
  }
  return absl::OkStatus();
}

absl::Status DataParallel::Update(double lr, double* grad_norm, absl::Duration* comm_wait) {
  if (zero_ == nullptr) {
    *grad_norm = ClipByGlobalNorm(model_->grads(), model_->num_params(), config_.grad_clip);
    adam_->Step(model_->params(), model_->grads(), lr);
    return absl::OkStatus();
  }
  float* grads = zero_->shard_grads();
  const size_t n = zero_->layout().shard_size();
  double squares = SumOfSquares(grads, n);
  const absl::Time start = absl::Now();
  absl::Status s = comm_->AllReduce(&squares, &squares, 1, DataType::kFloat64, ReduceOp::kSum)
                       .Wait(kCommTimeout);
  *comm_wait += absl::Now() - start;
  if (!s.ok()) return s;
  *grad_norm = std::sqrt(squares);
  ClipToNorm(grads, n, *grad_norm, config_.grad_clip);
  adam_->Step(model_->params(), grads, lr);
  if (absl::Status gathered = zero_->GatherParams(kCommTimeout); !gathered.ok()) return gathered;
  *comm_wait += zero_->last_wait();
  return absl::OkStatus();
}

absl::Status DataParallel::FullMoments(std::vector<float>* m, std::vector<float>* v) {
  if (zero_ == nullptr) {
    *m = adam_->m();
    *v = adam_->v();
    return absl::OkStatus();
  }
  m->assign(model_->num_params(), 0.0f);
  v->assign(model_->num_params(), 0.0f);
  if (absl::Status s = zero_->GatherShards(adam_->m().data(), m->data(), kCommTimeout); !s.ok()) {
    return s;
  }
  return zero_->GatherShards(adam_->v().data(), v->data(), kCommTimeout);
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
    const shard::Range owned = shards.owned(comm_->rank(), u);
    std::copy_n(m.data() + owned.begin, owned.length, adam_->m().data() + shards.shard_offset(u));
    std::copy_n(v.data() + owned.begin, owned.length, adam_->v().data() + shards.shard_offset(u));
  }
}

size_t DataParallel::state_bytes() const {
  size_t floats = 2 * model_->num_params() + 2 * adam_->owned_size();  // params, grads, moments
  if (zero_ != nullptr) floats += zero_->layout().shard_size();
  return floats * sizeof(float);
}

size_t DataParallel::buffer_bytes() const {
  if (reducer_ == nullptr) return 0;
  size_t bytes = 0;
  for (int b = 0; b < reducer_->plan().num_buckets(); ++b) {
    if (reducer_->plan().bucket(b).contiguous == nullptr) bytes += reducer_->plan().bucket(b).bytes;
  }
  return bytes;
}

std::string DataParallel::MemoryReport() const {
  const double mib = 1.0 / (1 << 20);
  const size_t flat = model_->num_params() * sizeof(float);
  const size_t shard = zero_ != nullptr ? zero_->layout().shard_size() * sizeof(float) : 0;
  const double psi = static_cast<double>(model_->layout().parameters());
  const int n = comm_ == nullptr ? 1 : comm_->size();
  const int stage = zero_ != nullptr ? config_.zero : 0;
  const double model = 4 * psi * (stage >= 3 ? 1.0 / n : 1.0) +
                       4 * psi * (stage >= 2 ? 1.0 / n : 1.0) +
                       8 * psi * (stage >= 1 ? 1.0 / n : 1.0);
  return absl::StrFormat(
      "memory per rank (zero=%d, %d rank%s): parameters %.2f MiB, gradients %.2f MiB, gradient "
      "shard %.2f MiB, optimizer state %.2f MiB, buffers %.2f MiB; state %.2f MiB against the "
      "model's %.2f MiB",
      stage, n, n == 1 ? "" : "s", flat * mib, flat * mib, shard * mib,
      2 * adam_->owned_size() * sizeof(float) * mib, buffer_bytes() * mib, state_bytes() * mib,
      model * mib);
}

}  // namespace weft::trainer
