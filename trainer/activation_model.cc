#include "activation_model.h"

namespace weft::trainer {

size_t PredictActivationBytes(const ModelShape& shape, int micro_batch, int tp,
                              bool sequence_parallel, const StagePart& part,
                              const ActivationOptions& options) {
  const double B = micro_batch, T = shape.seq_len, C = shape.n_embd, A = shape.n_head;
  const double t = tp, t_sp = sequence_parallel ? tp : 1;
  const double value = options.precision == Precision::kFloat32 ? 4 : 2;
  const double rows = B * T / t_sp;  // this rank's token rows in the C-wide regions
  const double stats = 4 * rows * 4;
  const double none = (B * T * C * (4 / t_sp + 12 / t) + A * T * T * B / t) * value + stats;
  const double selective = B * T * C * (4 / t_sp + 11 / t) * value + stats;
  const double full = rows * C * value;
  const int virtual_stages = part.stages * part.chunks;
  const int per_chunk = shape.n_layer / virtual_stages;
  double bytes = 0;
  for (int c = 0; c < part.chunks; ++c) {
    int recomputed = 0;
    if (options.recompute == Recompute::kFull) {
      recomputed = options.recompute_layers < 0 || options.recompute_layers > per_chunk
                       ? per_chunk
                       : options.recompute_layers;
    }
    const double block = options.recompute == Recompute::kSelective ? selective : none;
    double chunk = rows * C * 4 + recomputed * full + (per_chunk - recomputed) * block;
    if (c * part.stages + part.stage == virtual_stages - 1) {
      chunk += rows * C * 4 + 2 * rows * 4 + 2 * B * T * (shape.vocab / t) * 4;
    }
    const int slots = c < static_cast<int>(part.slots.size()) ? part.slots[c] : 1;
    bytes += slots * chunk;
  }
  return static_cast<size_t>(bytes);
}

}  // namespace weft::trainer
