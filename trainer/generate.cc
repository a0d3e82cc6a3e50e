#include "generate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::trainer {

absl::StatusOr<std::string> Generate(const NextLogits& next_logits, int seq_len, int vocab,
                                     int row_multiple, const std::string& prompt, int n,
                                     float temperature, Rng* rng) {
  const int T = seq_len;
  const int V = vocab;
  std::vector<uint8_t> text(prompt.begin(), prompt.end());
  std::vector<float> p(V), logits(V);
  std::vector<uint8_t> context(T);
  for (int i = 0; i < n; ++i) {
    const int len = std::min<int>(static_cast<int>(text.size()), T);
    const int m = row_multiple;
    const int padded = (len + m - 1) / m * m;
    std::fill(context.begin(), context.end(), 0);
    std::copy(text.end() - len, text.end(), context.begin());
    if (absl::Status s = next_logits(context.data(), padded, len - 1, logits.data()); !s.ok()) {
      return s;
    }
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
