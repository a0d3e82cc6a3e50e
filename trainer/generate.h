// Text generation from a trained model: sampling bytes one at a time.
#pragma once

#include <string>

#include "model.h"
#include "rng.h"

namespace weft::trainer {

// Continues `prompt` by `n` bytes, sampled from softmax(logits / temperature); the context is the
// last seq_len bytes. Uses the model's activations (call it between training steps, not inside).
// Collective over the model's tensor-parallel group: each of its ranks calls it with the same RNG
// state and gets the same text.
std::string Generate(Gpt* model, const std::string& prompt, int n, float temperature, Rng* rng);

// The text made printable for a terminal: control bytes other than newline and tab as '.'.
std::string Printable(const std::string& text);

}  // namespace weft::trainer
