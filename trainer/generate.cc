#include "generate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::trainer {

std::string Generate(Gpt* model, const std::string& prompt, int n, float temperature, Rng* rng) {
  const int T = model->shape().seq_len;
  const int V = model->shape().vocab;
  std::vector<uint8_t> text(prompt.begin(), prompt.end());
  std::vector<float> p(V), logits(V);
  std::vector<uint8_t> context(T);
  for (int i = 0; i < n; ++i) {
    const int len = std::min<int>(static_cast<int>(text.size()), T);
    // Padded at the end to the rows the model takes: causal attention keeps the padding out of
    // the positions before it.
    const int m = model->row_multiple();
    const int padded = (len + m - 1) / m * m;
    std::fill(context.begin(), context.end(), 0);
    std::copy(text.end() - len, text.end(), context.begin());
    model->Forward(context.data(), nullptr, 1, padded);
    model->GatherLogits(len - 1, logits.data());
    const float maxv = *std::max_element(logits.begin(), logits.end());
    float sum = 0.0f;
    for (int v = 0; v < V; ++v) {
      p[v] = std::exp((logits[v] - maxv) / temperature);
      sum += p[v];
    }
    float r = rng->Uniform() * sum;
    int chosen = V - 1;
    for (int v = 0; v < V; ++v) {
      r -= p[v];
      if (r < 0) {
        chosen = v;
        break;
      }
    }
    text.push_back(static_cast<uint8_t>(chosen));
  }
  return std::string(text.begin() + static_cast<std::ptrdiff_t>(prompt.size()), text.end());
}

std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\t') c = '.';
  }
  return out;
}

}  // namespace weft::trainer
