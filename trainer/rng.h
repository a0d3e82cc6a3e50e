// Deterministic random numbers for the trainer: the same stream on every machine and compiler
// (std::normal_distribution is implementation-defined), with a state that fits a checkpoint.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "weft/kernels/hash.h"

namespace weft::trainer {

// A standard normal that is a pure function of (seed, name, index): element `index` of tensor
// `name` gets the same value whichever rank, shard or slice of the tensor asks for it.
inline float IndexedNormal(uint64_t seed, std::string_view name, uint64_t index) {
  const uint64_t key = Mix64(seed ^ Mix64(Fnv1a(name)));
  const double u1 =
      (static_cast<double>(Mix64(key + 2 * index) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  const double u2 =
      static_cast<double>(Mix64(key + 2 * index + 1) >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}
  uint64_t state() const { return state_; }

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix64(state_);
  }
  // Uniform in [0, 1) with 24 random bits.
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Standard normal (Box-Muller; one value per call keeps the state a single word).
  float Normal() {
    const double u1 = (static_cast<double>(Next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    const double u2 = static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

}  // namespace weft::trainer
