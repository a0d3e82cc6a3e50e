#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint.h"
#include "optimizer.h"
#include "run.h"

namespace weft::trainer {

absl::Status Run::Step(int step, double* loss, double* grad_norm, double* lr,
                       absl::Duration* comm_wait) {
  const int T = config_.seq_len;
  const int dp = data_.size();
  const int accum = config_.grad_accum;
  // The mean over the step's tokens, times fp16's loss scale (a power of two: exact).
  const float loss_scale =
      static_cast<float>(scaler_.scale()) / (static_cast<float>(micro_) * T * accum);
  dp_->ZeroGrads();
  dp_->set_compression_active(step >= config_.compression_warmup_steps);
  double local_loss = 0;
  // Testing: rank 0's first gradient of the step's last pass overflows before any reduction.
  bool poison = step == config_.inject_overflow_step && group_.rank() == 0;
  bool last_pass = false;
  const auto on_ready = [&](int tensor) {
    if (poison && last_pass) {
      model_->grad(tensor)[0] = std::numeric_limits<float>::infinity();
      poison = false;
    }
    dp_->TensorReady(tensor);
  };
  for (int m = 0; m < accum; ++m) {
    last_pass = m == accum - 1;
    // The ranks of a tensor-parallel group, and of a pipeline, read the same sequences.
    const uint64_t first = static_cast<uint64_t>(step) * config_.batch_size +
                           static_cast<uint64_t>(m * dp + data_.rank()) * micro_;
    GatherTrainSamples(corpus_.train, config_.seed, first, micro_, T, tokens_.data(),
                       targets_.data());
    dp_->BeginBackward(/*sync=*/m == accum - 1);
    if (pipeline_ != nullptr) {
      if (absl::Status s =
              pipeline_->Train(tokens_.data(), targets_.data(), micro_ / config_.micro_batches, T,
                               loss_scale, /*final_pass=*/m == accum - 1, on_ready, &local_loss);
          !s.ok()) {
        return s;
      }
    } else {
      local_loss += model_->Forward(tokens_.data(), targets_.data(), micro_, T);
      model_->Backward(loss_scale, on_ready);
    }
    if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
    if (absl::Status s = dp_->FinishBackward(comm_wait); !s.ok()) return s;
  }
  // The step's loss: the mean over every token of the global batch (each tensor-parallel group
  // holds its sequences' whole loss, a pipeline's last stage).
  double sum = local_loss;
  if (absl::Status s = data_.SumDoubles(&sum, 1, comm_wait); !s.ok()) return s;
  if (pipeline_ != nullptr) {
    if (absl::Status s = PipelineFigures(&sum); !s.ok()) return s;
  }
  *loss = sum / (static_cast<double>(config_.batch_size) * T);
  *lr = LearningRate(step, config_.steps, config_.warmup_steps, config_.scaled_lr(),
                     config_.min_lr_ratio);
  skipped_ = false;
  if (config_.precision == "fp16") {
    // One all-reduce over every rank: any infinity or NaN in any rank's gradients skips the step
    // everywhere (under ZeRO each rank sees only its slices).
    int32_t overflow = dp_->GradientsFinite() ? 0 : 1;
    if (group_.comm() != nullptr) {
      if (absl::Status s =
              group_.comm()
                  ->AllReduce(&overflow, &overflow, 1, DataType::kInt32, ReduceOp::kMax)
                  .Wait(kCommTimeout);
          !s.ok()) {
        return s;
      }
    }
    const double scale = scaler_.scale();
    if (scaler_.Update(overflow != 0)) {
      skipped_ = true;
      *grad_norm = std::numeric_limits<double>::infinity();
      return absl::OkStatus();
    }
    return dp_->Update(*lr, grad_norm, comm_wait, static_cast<float>(1.0 / scale));
  }
  return dp_->Update(*lr, grad_norm, comm_wait);
}

NextLogits Run::SampleLogits() {
  return [this](const uint8_t* context, int length, int row, float* logits) -> absl::Status {
    if (pipeline_ == nullptr) {
      model_->Forward(context, nullptr, 1, length);
      model_->GatherLogits(0, row, logits);
      return tp_->TakeError();
    }
    // Through the stages; the last one's logits go to every stage.
    double unused = 0;
    if (absl::Status s = pipeline_->Forward(context, nullptr, 1, length, 1, &unused); !s.ok()) {
      return s;
    }
    const int last = pipeline_->stages() - 1;
    if (pipeline_->stage() == last) model_->GatherLogits(0, row, logits);
    if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
    return pipeline_->Broadcast(logits, config_.shape().vocab, last);
  };
}

absl::Status Run::PipelineFigures(double* loss) {
  // Over the stages: the loss (the last stage's), and each stage's busy, idle and communication
  // time, from which the bubble is idle over each stage's pass, averaged over the stages.
  const Pipeline::Figures& f = pipeline_->figures();
  if (absl::Status s = pipeline_->SumOverStages(loss, 1); !s.ok()) return s;
  const double mine[3] = {f.busy_s * 1e3, f.idle_s * 1e3, f.comm_s * 1e3};
  stage_ms_.resize(3 * pipeline_->stages());
  if (absl::Status s = pipeline_->GatherOverStages(mine, 3, stage_ms_.data()); !s.ok()) return s;
  bubble_fraction_ = 0;
  for (int stage = 0; stage < pipeline_->stages(); ++stage) {
    const double* t = &stage_ms_[3 * stage];
    const double total = t[0] + t[1] + t[2];
    bubble_fraction_ += total > 0 ? t[1] / total / pipeline_->stages() : 0.0;
  }
  peak_activations_ = f.peak_activations;
  return absl::OkStatus();
}

absl::StatusOr<double> Run::Evaluate(absl::Duration* comm_wait) {
  const int T = config_.seq_len;
  const int count = config_.eval_batches * config_.batch_size;
  double totals[2] = {0, 0};  // summed loss, tokens
  int filled = 0;
  absl::Status status;
  auto flush = [&] {
    if (filled == 0) return;
    if (pipeline_ != nullptr) {
      const int b = micro_ / config_.micro_batches;
      if (status.ok()) {
        status = pipeline_->Forward(tokens_.data(), targets_.data(), b, T, filled / b, &totals[0]);
      }
    } else {
      totals[0] += model_->Forward(tokens_.data(), targets_.data(), filled, T);
    }
    totals[1] += static_cast<double>(filled) * T;
    filled = 0;
  };
  // Each data-parallel rank gets count / dp sequences, a multiple of the micro-batch.
  for (int k = data_.rank(); k < count; k += data_.size()) {
    GatherValSample(corpus_.val, k, count, T, tokens_.data() + static_cast<size_t>(filled) * T,
                    targets_.data() + static_cast<size_t>(filled) * T);
    if (++filled == micro_) flush();
  }
  flush();
  if (!status.ok()) return status;
  if (absl::Status s = tp_->TakeError(); !s.ok()) return s;
  if (absl::Status s = dp_->TakeError(); !s.ok()) return s;
  if (absl::Status s = data_.SumDoubles(totals, 2, comm_wait); !s.ok()) return s;
  if (pipeline_ != nullptr) {
    if (absl::Status s = pipeline_->SumOverStages(totals, 1); !s.ok()) return s;
  }
  return totals[0] / totals[1];
}

}  // namespace weft::trainer
