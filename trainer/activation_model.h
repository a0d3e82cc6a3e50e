// The activation memory a rank keeps from forward to backward, predicted from the shape of the
// run alone (no buffers made): per block of B sequences of T tokens, width C, A heads, over a
// tensor-parallel group of t ranks (sequence parallelism divides the C-wide regions by t too),
//
//   none       LN1, QKV, probabilities, attention output, residual, LN2, fc, GELU, output:
//              B·T·C·(4/t_sp + 12/t) + A·T²·B/t values, and 4 fp32 LayerNorm statistics a row;
//   selective  the same without the attention core (probabilities and output):
//              B·T·C·(4/t_sp + 11/t) values and the statistics;
//   full       the block's output only: B·T·C/t_sp values,
//
// values being 4 bytes in fp32 and 2 under mixed precision; plus per chunk its input and, for the
// head, the final LayerNorm with its statistics and the logits and probabilities of this rank's
// vocabulary slice (fp32). A pipeline stage keeps a chunk's activations for as many micro-batches
// as its schedule has in flight at once (StagePart::slots). (Korthikanti et al. count
// 34·s·b·h + 5·a·s²·b bytes per layer for Megatron's blocks in 16 bits: those keep dropout masks,
// these keep GELU's input and output and no masks.)
#pragma once

#include <cstddef>

#include "model.h"

namespace weft::trainer {

// Bytes of activations this rank keeps at the peak: `part`'s chunks, each slot sized for
// `micro_batch` sequences of shape.seq_len tokens.
size_t PredictActivationBytes(const ModelShape& shape, int micro_batch, int tp,
                              bool sequence_parallel, const StagePart& part,
                              const ActivationOptions& options);

}  // namespace weft::trainer
