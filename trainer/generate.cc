#include "generate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::trainer {

std::string Generate(Gpt* model, const std::string& prompt, int n, float temperature, Rng* rng) {
  const int T = model->shape().seq_len;
  const int V = model->shape().vocab;
  std::vector<uint8_t> text(prompt.begin(), prompt.end());
  std::vector<float> p(V);
  for (int i = 0; i < n; ++i) {
    const int len = std::min<int>(static_cast<int>(text.size()), T);
    model->Forward(text.data() + text.size() - len, nullptr, 1, len);
    const float* logits = model->logits() + static_cast<size_t>(len - 1) * V;
    const float maxv = *std::max_element(logits, logits + V);
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
