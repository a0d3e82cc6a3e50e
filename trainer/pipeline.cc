#include "pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace weft::trainer {
namespace {

double Since(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

}  // namespace

Pipeline::Pipeline(Communicator* stages, PipeSchedule schedule, Gpt* model, absl::Duration timeout)
    : stages_comm_(stages),
      schedule_(std::move(schedule)),
      model_(model),
      timeout_(timeout),
      stage_(stages->rank()) {}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(Communicator* stages,
                                                           PipeSchedule schedule, Gpt* model,
                                                           absl::Duration timeout) {
  std::unique_ptr<Pipeline> pipe(new Pipeline(stages, std::move(schedule), model, timeout));
  const int p = stages->size(), s = stages->rank();
  // Channel i of a kind joins stage i and stage i+1 (mod p); the ring's closing channel only
  // carries the interleaved schedule's passes from the last stage back to the first.
  const int channels = pipe->schedule_.chunks > 1 ? p : p - 1;
  for (const bool activations : {true, false}) {
    for (int i = 0; i < channels; ++i) {
      const int src = activations ? i : (i + 1) % p;
      const int dst = activations ? (i + 1) % p : i;
      const bool member = s == src || s == dst;
      absl::StatusOr<std::unique_ptr<Communicator>> channel =
          stages->Split(member ? 0 : -1, s == src ? 0 : 1);
      if (!channel.ok()) return channel.status();
      if (s == src) (activations ? pipe->act_out_ : pipe->grad_out_) = *std::move(channel);
      if (s == dst) (activations ? pipe->act_in_ : pipe->grad_in_) = *std::move(channel);
    }
  }
  const bool ends = s == 0 || s == p - 1;
  absl::StatusOr<std::unique_ptr<Communicator>> embedding = stages->Split(ends ? 0 : -1, s);
  if (!embedding.ok()) return embedding.status();
  pipe->embedding_group_ = *std::move(embedding);
  return pipe;
}

std::vector<int> Pipeline::SlotsPerChunk(const PipeSchedule& schedule, int stage) {
  std::vector<int> live(schedule.chunks, 0), most(schedule.chunks, 1);
  for (const PipeAction& a : schedule.actions[stage]) {
    live[a.chunk] += a.op == PipeOp::kForward ? 1 : -1;
    most[a.chunk] = std::max(most[a.chunk], live[a.chunk]);
  }
  return most;
}

absl::Status Pipeline::Wait(Work& work, double* seconds) {
  const absl::Time start = absl::Now();
  absl::Status s = work.Wait(timeout_);
  *seconds += Since(start);
  return s;
}

std::vector<float> Pipeline::TakeBuffer(size_t count) {
  std::vector<float> buffer;
  if (!spare_.empty()) {
    buffer = std::move(spare_.back());
    spare_.pop_back();
  }
  buffer.resize(count);
  return buffer;
}

void Pipeline::PostReceive(const Step& step, size_t count, Transfer* into) {
  into->buffer = TakeBuffer(count);
  Communicator* channel = step.action.op == PipeOp::kForward ? act_in_.get() : grad_in_.get();
  into->work = channel->Recv(into->buffer.data(), count, DataType::kFloat32, /*peer=*/0);
}

absl::Status Pipeline::Send(Communicator* channel, const float* data, size_t count) {
  const absl::Time start = absl::Now();
  Transfer t;
  t.buffer = TakeBuffer(count);
  std::copy(data, data + count, t.buffer.begin());
  t.work = channel->Send(t.buffer.data(), count, DataType::kFloat32, /*peer=*/1);
  bytes_sent_ += count * sizeof(float);
  sends_.push_back(std::move(t));
  figures_.comm_s += Since(start);
  return ReapSends(false);
}

absl::Status Pipeline::ReapSends(bool all) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (!all && !it->work.Test()) {
      ++it;
      continue;
    }
    if (absl::Status s = Wait(it->work, &figures_.comm_s); !s.ok()) return s;
    GiveBack(std::move(it->buffer));
    it = sends_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status Pipeline::Run(const std::vector<Step>& steps, const uint8_t* tokens,
                           const uint8_t* targets, int B, int T, float loss_scale, bool final_pass,
                           const std::function<void(int tensor)>& on_ready, double* loss) {
  figures_ = Figures{};
  const size_t count = static_cast<size_t>(B) * T / model_->row_multiple() * model_->shape().n_embd;
  const size_t tokens_per_batch = static_cast<size_t>(B) * T;
  const int chunks = schedule_.chunks;
  // Slots: free ones per chunk, and the slot of each micro-batch in flight.
  std::vector<std::vector<int>> free(chunks);
  std::vector<std::vector<int>> slot_of(chunks, std::vector<int>(schedule_.micro_batches, -1));
  for (int c = 0; c < chunks; ++c) {
    for (int k = static_cast<int>(SlotsPerChunk(schedule_, stage_)[c]) - 1; k >= 0; --k) {
      free[c].push_back(k);
    }
  }
  // Each chunk's last backward reports its tensors; the tied embedding waits for the other end.
  std::vector<size_t> last_backward(chunks, steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].action.op == PipeOp::kBackward) last_backward[steps[i].action.chunk] = i;
  }
  const int tied =
      stage_ == 0 ? model_->embedding_tensor()
      : model_->head_tensor() >= 0 && model_->head_tensor() != model_->embedding_tensor()
          ? model_->head_tensor()
          : -1;
  const auto report = [&](int tensor) {
    if (tensor != tied) on_ready(tensor);
  };
  const auto nothing = [](int) {};
  // The next receive, posted one receiving step ahead.
  Transfer incoming;
  size_t posted = steps.size();
  const auto post_after = [&](size_t i) {
    for (size_t j = i + 1; j < steps.size(); ++j) {
      if (!steps[j].receives) continue;
      if (posted != j) {
        PostReceive(steps[j], count, &incoming);
        posted = j;
      }
      return;
    }
  };
  int live = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipeAction& a = steps[i].action;
    const float* input = nullptr;
    if (steps[i].receives) {
      if (posted != i) {
        PostReceive(steps[i], count, &incoming);
        posted = i;
      }
      if (absl::Status s = Wait(incoming.work, &figures_.idle_s); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("pipeline stage ", stage_, ", action ", i, " (",
                                         a.op == PipeOp::kForward ? "F" : "B", a.micro_batch, ".",
                                         a.chunk, "): ", s.message()));
      }
      input = incoming.buffer.data();
    }
    std::vector<float> received;
    if (input != nullptr) {
      received = std::move(incoming.buffer);  // the next receive takes another buffer
      input = received.data();
    }
    post_after(i);
    const size_t at = static_cast<size_t>(a.micro_batch) * tokens_per_batch;
    const absl::Time start = absl::Now();
    if (a.op == PipeOp::kForward) {
      const int slot = free[a.chunk].back();
      free[a.chunk].pop_back();
      slot_of[a.chunk][a.micro_batch] = slot;
      figures_.peak_activations = std::max(figures_.peak_activations, ++live);
      *loss += model_->ChunkForward(a.chunk, slot, tokens + at, targets + at, input, B, T);
      figures_.busy_s += Since(start);
      if (!model_->has_head(a.chunk)) {
        if (absl::Status s = Send(act_out_.get(), model_->ChunkOutput(a.chunk, slot), count);
            !s.ok()) {
          return s;
        }
      }
    } else {
      const int slot = slot_of[a.chunk][a.micro_batch];
      const bool last = final_pass && last_backward[a.chunk] == i;
      model_->ChunkBackward(a.chunk, slot, input, loss_scale,
                            last ? std::function<void(int)>(report) : nothing);
      figures_.busy_s += Since(start);
      free[a.chunk].push_back(slot);
      --live;
      if (!model_->has_embedding(a.chunk)) {
        if (absl::Status s = Send(grad_out_.get(), model_->ChunkInputGrad(a.chunk), count);
            !s.ok()) {
          return s;
        }
      }
    }
    if (!received.empty()) GiveBack(std::move(received));  // the model copied it
    if (absl::Status s = model_->tensor_parallel().TakeError(); !s.ok()) return s;
  }
  if (absl::Status s = ReapSends(true); !s.ok()) return s;
  if (final_pass && embedding_group_ != nullptr && tied >= 0) {
    // The tied embedding's two gradients summed, then reported.
    const size_t n = model_->layout().tensor(tied).size;
    bytes_sent_ += n * sizeof(float);
    const absl::Time start = absl::Now();
    absl::Status s = embedding_group_
                         ->AllReduce(model_->grad(tied), model_->grad(tied), n, DataType::kFloat32,
                                     ReduceOp::kSum)
                         .Wait(timeout_);
    figures_.comm_s += Since(start);
    if (!s.ok()) return s;
    on_ready(tied);
  }
  return absl::OkStatus();
}

absl::Status Pipeline::Train(const uint8_t* tokens, const uint8_t* targets, int B, int T,
                             float loss_scale, bool final_pass,
                             const std::function<void(int tensor)>& on_ready, double* loss) {
  std::vector<Step> steps;
  for (const PipeAction& a : schedule_.actions[stage_]) {
    const bool receives =
        a.op == PipeOp::kForward ? !model_->has_embedding(a.chunk) : !model_->has_head(a.chunk);
    steps.push_back({a, receives});
  }
  return Run(steps, tokens, targets, B, T, loss_scale, final_pass, on_ready, loss);
}

absl::Status Pipeline::Forward(const uint8_t* tokens, const uint8_t* targets, int B, int T,
                               int micro_batches, double* loss) {
  const size_t count = static_cast<size_t>(B) * T / model_->row_multiple() * model_->shape().n_embd;
  const size_t tokens_per_batch = static_cast<size_t>(B) * T;
  for (int m = 0; m < micro_batches; ++m) {
    for (int c = 0; c < schedule_.chunks; ++c) {
      std::vector<float> input;
      if (!model_->has_embedding(c)) {
        Transfer in;
        PostReceive({{PipeOp::kForward, m, c}, true}, count, &in);
        double waited = 0;
        if (absl::Status s = Wait(in.work, &waited); !s.ok()) return s;
        input = std::move(in.buffer);
      }
      const size_t at = static_cast<size_t>(m) * tokens_per_batch;
      *loss += model_->ChunkForward(c, 0, tokens + at, targets == nullptr ? nullptr : targets + at,
                                    input.data(), B, T);
      if (!input.empty()) GiveBack(std::move(input));
      if (absl::Status s = model_->tensor_parallel().TakeError(); !s.ok()) return s;
      if (!model_->has_head(c)) {
        if (absl::Status s = Send(act_out_.get(), model_->ChunkOutput(c, 0), count); !s.ok()) {
          return s;
        }
      }
    }
  }
  return ReapSends(true);
}

absl::Status Pipeline::Broadcast(float* data, size_t count, int root) {
  return stages_comm_->Broadcast(data, data, count, DataType::kFloat32, root).Wait(timeout_);
}

absl::Status Pipeline::GatherOverStages(const double* mine, size_t count, double* all) {
  return stages_comm_->AllGather(mine, all, count, DataType::kFloat64).Wait(timeout_);
}

absl::Status Pipeline::SumOverStages(double* values, size_t count) {
  return stages_comm_->AllReduce(values, values, count, DataType::kFloat64, ReduceOp::kSum)
      .Wait(timeout_);
}

}  // namespace weft::trainer
