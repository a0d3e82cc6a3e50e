// Text generation from a trained model: sampling bytes one at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "rng.h"

namespace weft::trainer {

// Fills logits[vocab] with the model's next-token logits at row `row` of `context`, a sequence of
// `length` tokens; every caller of Generate gets the same values.
using NextLogits =
    std::function<absl::Status(const uint8_t* context, int length, int row, float* logits)>;

// Continues `prompt` by `n` bytes, sampled from softmax(logits / temperature); the context is the
// last seq_len bytes, padded at its end to a multiple of `row_multiple` tokens (causal attention
// keeps the padding out of the positions before it). Every rank that runs the model's passes
// calls it with the same RNG state and gets the same text.
absl::StatusOr<std::string> Generate(const NextLogits& next_logits, int seq_len, int vocab,
                                     int row_multiple, const std::string& prompt, int n,
                                     float temperature, Rng* rng);

// The text made printable for a terminal: control bytes other than newline and tab as '.'.
std::string Printable(const std::string& text);

}  // namespace weft::trainer
