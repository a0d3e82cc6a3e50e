// Writes what torch_crosscheck.py needs to recompute one forward and backward of the GPT in
// PyTorch: the initial parameters with their layout, one batch, and Weft's loss and gradients.
//
//   trainer_torch_dump OUT_DIR
//
// OUT_DIR/shape.txt      n_layer n_head n_embd seq_len vocab batch
// OUT_DIR/layout.txt     one line per tensor: name offset size dim0 [dim1]
// OUT_DIR/params.f32, grads.f32    the flat buffers (little-endian float32)
// OUT_DIR/tokens.u8, targets.u8    B·T bytes each
// OUT_DIR/loss.txt       the mean cross-entropy over the batch, 17 significant digits
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "model.h"
#include "rng.h"

namespace {

bool WriteBytes(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trainer_torch_dump OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using weft::trainer::Gpt;
  // Width 64 and context 32 reach the ops' full 16-lane loops and their tails.
  const weft::trainer::ModelShape shape{
      .n_layer = 2, .n_head = 4, .n_embd = 64, .seq_len = 32, .vocab = 256};
  const int B = 3, T = shape.seq_len;
  Gpt model(shape, B);
  model.InitParams(1337);
  // Perturb the zero biases and unit norms so that their gradients and uses are all exercised.
  weft::trainer::Rng rng(99);
  for (size_t i = 0; i < model.num_params(); ++i) model.params()[i] += 0.05f * rng.Normal();

  std::vector<uint8_t> tokens(static_cast<size_t>(B) * T), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint8_t>(rng.Next() >> 56);
    targets[i] = static_cast<uint8_t>(rng.Next() >> 56);
  }
  const std::vector<float> initial(model.params(), model.params() + model.num_params());
  model.ZeroGrads();
  const double loss = model.Forward(tokens.data(), targets.data(), B, T) / (B * T);
  model.Backward(1.0f / static_cast<float>(B * T), [](int) {});

  std::ofstream(dir + "/shape.txt")
      << shape.n_layer << " " << shape.n_head << " " << shape.n_embd << " " << shape.seq_len << " "
      << shape.vocab << " " << B << "\n";
  std::ofstream layout(dir + "/layout.txt");
  for (const weft::trainer::TensorView& t : model.layout().tensors()) {
    layout << t.name << " " << t.offset << " " << t.size;
    for (int d : t.shape) layout << " " << d;
    layout << "\n";
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g\n", loss);
  std::ofstream(dir + "/loss.txt") << text;
  const size_t bytes = model.num_params() * sizeof(float);
  const bool ok = WriteBytes(dir + "/params.f32", initial.data(), bytes) &&
                  WriteBytes(dir + "/grads.f32", model.grads(), bytes) &&
                  WriteBytes(dir + "/tokens.u8", tokens.data(), tokens.size()) &&
                  WriteBytes(dir + "/targets.u8", targets.data(), targets.size()) &&
                  static_cast<bool>(layout);
  if (!ok) {
    std::fprintf(stderr, "trainer_torch_dump: cannot write under %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
