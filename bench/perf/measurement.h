// One measured half row: a (size, type, operator, root, placement) and what was measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft::perf {

// -P: what carried the operation, and how its time compares with the tuner's alpha-beta model.
struct Prediction {
  // The algorithm the communicator ran (the tuner's choice, or the one -A / WEFT_ALGO forced);
  // "p2p" for tools built from point-to-point groups, "none" when the size left nothing to run.
  std::string algorithm;
  std::optional<double> predicted_us;  // empty when the tuner cannot price the algorithm
  // The measured time per operation (-a's combination, never -C's issue time) / predicted_us.
  std::optional<double> measured_over_predicted;
};

// --compression: the bytes one operation sent from a rank, and what an uncompressed fp32 ring
// (the tool's collective) sends for the same size.
struct WireBytes {
  uint64_t bytes = 0;
  uint64_t uncompressed_bytes = 0;
};

struct Measurement {
  int cycle = 1;  // -N: which pass over the sizes, from 1
  int64_t bytes = 0;
  int64_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  bool in_place = false;
  double time_us = 0;  // per operation; the time to issue them with -C
  double algbw = 0;    // GB/s (1e9 bytes per second)
  double busbw = 0;
  std::optional<int64_t> wrong;          // summed over ranks; empty when not checked
  std::optional<Prediction> prediction;  // only with -P
  std::string variant;                   // -V: the variant measured; empty without -V
  std::optional<WireBytes> wire;         // only with --compression
};

}  // namespace weft::perf
