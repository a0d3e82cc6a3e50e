// One measured half row: a (size, type, operator, root, placement) and what was measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft::perf {

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
  std::optional<int64_t> wrong;  // summed over ranks; empty when not checked
};

}  // namespace weft::perf
