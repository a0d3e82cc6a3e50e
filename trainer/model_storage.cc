// What a block keeps from its forward to its backward (recomputation) and in which format
// (mixed precision), and the working copies of the parameters under mixed precision: the storage
// side of model.h's Gpt, apart from the math in model.cc.
#include <algorithm>
#include <utility>

#include "model.h"

namespace weft::trainer {

std::vector<Gpt::Field> Gpt::Kept(Recompute mode, bool stats) {
  using A = BlockActivations;
  if (stats) {
    if (mode == Recompute::kFull) return {};
    return {&A::ln1_mean, &A::ln1_rstd, &A::ln2_mean, &A::ln2_rstd};
  }
  switch (mode) {
    case Recompute::kFull:
      return {&A::out};
    case Recompute::kSelective:  // not the attention core: its probabilities and output
      return {&A::ln1, &A::qkv, &A::res2, &A::ln2, &A::fch, &A::fch_gelu, &A::out};
    case Recompute::kNone:
      break;
  }
  return {&A::ln1, &A::qkv, &A::att, &A::atty, &A::res2, &A::ln2, &A::fch, &A::fch_gelu, &A::out};
}

size_t Gpt::FieldSize(Field field, size_t B, size_t T) const {
  using A = BlockActivations;
  const size_t N = B * T, held = N / row_multiple();
  if (field == &A::ln1_mean || field == &A::ln1_rstd || field == &A::ln2_mean ||
      field == &A::ln2_rstd) {
    return held;
  }
  if (field == &A::qkv) return N * 3 * Ca_;
  if (field == &A::att) return B * NHa_ * T * T;
  if (field == &A::atty) return N * Ca_;
  if (field == &A::fch || field == &A::fch_gelu) return N * H_;
  return held * C_;  // ln1, res2, ln2, out: this rank's rows
}

void Gpt::AllocateBlock(BlockActivations& a, bool scratch) {
  const size_t B = max_batch_, T = shape_.seq_len;
  if (scratch) {
    for (bool stats : {false, true}) {
      for (Field f : Kept(Recompute::kNone, stats)) (a.*f).resize(FieldSize(f, B, T));
    }
    return;
  }
  for (Field f : Kept(a.mode, true)) (a.*f).resize(FieldSize(f, B, T));
  size_t packed = 0;
  for (Field f : Kept(a.mode, false)) {
    if (mixed()) {
      packed += FieldSize(f, B, T);
    } else {
      (a.*f).resize(FieldSize(f, B, T));
    }
  }
  a.packed.resize(packed);
}

Gpt::BlockActivations& Gpt::OpenBlock(BlockActivations& a, int B, int T, bool unpack) {
  BlockActivations& r = scratch_;
  if (!mixed()) {
    if (a.mode == Recompute::kNone) return a;
    const std::vector<Field> kept = Kept(a.mode, false), stats = Kept(a.mode, true);
    for (bool s : {false, true}) {
      for (Field f : Kept(Recompute::kNone, s)) {
        const std::vector<Field>& mine = s ? stats : kept;
        if (std::find(mine.begin(), mine.end(), f) == mine.end()) std::swap(a.*f, r.*f);
      }
    }
    return a;
  }
  for (Field f : Kept(a.mode, true)) std::swap(a.*f, r.*f);
  if (unpack) {
    const uint16_t* from = a.packed.data();
    for (Field f : Kept(a.mode, false)) {
      const size_t n = FieldSize(f, B, T);
      Widen(options_.precision, from, (r.*f).data(), n);
      from += n;
    }
  }
  return r;
}

void Gpt::CloseBlock(BlockActivations& a, int B, int T, bool pack) {
  if (!mixed()) {
    OpenBlock(a, B, T, false);  // the same exchanges again
    return;
  }
  BlockActivations& r = scratch_;
  if (pack) {
    uint16_t* to = a.packed.data();
    for (Field f : Kept(a.mode, false)) {
      const size_t n = FieldSize(f, B, T);
      Narrow(options_.precision, (r.*f).data(), to, n);
      to += n;
    }
  }
  for (Field f : Kept(a.mode, true)) std::swap(a.*f, r.*f);
}

const float* Gpt::BlockOutput(Chunk& chunk, Slot& s, int i) {
  const BlockActivations& a = s.blocks[i];
  if (!mixed()) return a.out.data();
  // `out` is the last kept tensor.
  const size_t n = FieldSize(&BlockActivations::out, s.B, s.T);
  size_t at = 0;
  for (Field f : Kept(a.mode, false)) at += FieldSize(f, s.B, s.T);
  Widen(options_.precision, a.packed.data() + at - n, chunk.x.data(), n);
  return chunk.x.data();
}

size_t Gpt::kept_activation_bytes() const {
  size_t bytes = 0;
  const auto floats = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  for (const Chunk& chunk : chunks_) {
    for (const Slot& s : chunk.slots) {
      bytes += floats(s.input) + floats(s.lnf) + floats(s.lnf_mean) + floats(s.lnf_rstd) +
               floats(s.logits) + floats(s.probs);
      for (const BlockActivations& a : s.blocks) {
        for (bool stats : {false, true}) {
          for (Field f : Kept(Recompute::kNone, stats)) bytes += floats(a.*f);
        }
        bytes += a.packed.size() * sizeof(uint16_t);
      }
    }
  }
  return bytes;
}

size_t Gpt::working_param_bytes() const {
  return (work_embedding_.size() + work_head_.size() + work_block_.size()) * sizeof(float);
}

void Gpt::RoundUnit(int unit) {
  std::vector<float>& work = unit == embedding_unit_ ? work_embedding_
                             : unit == head_unit_    ? work_head_
                                                     : work_block_;
  const size_t n = layout_.units()[unit].size;
  std::copy(unit_params_[unit], unit_params_[unit] + n, work.begin());
  RoundTo(options_.precision, work.data(), n);
  unit_read_[unit] = work.data();
}

}  // namespace weft::trainer
