// One rank's flight-recorder dump (comm/src/flight_recorder.h), as weft-trace reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::trace {

inline constexpr int kSupportedVersion = 1;
// Far above any real job; a dump claiming more is corrupt (and would make the analysis loop over
// absurd rank ranges).
inline constexpr int64_t kMaxRanks = int64_t{1} << 20;

struct OpRecord {
  uint64_t id = 0;
  uint64_t seq = 0;
  bool collective = false;
  std::string op;  // "all_reduce", "send", "group", ...
  std::string dtype;
  std::string reduce_op;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t root = -1;
  int64_t peer = -1;
  std::string algorithm;
  std::string state;  // queued, running, done, failed
  int64_t enqueue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string error;
};

struct RankDump {
  std::string source;  // the file it came from, for messages
  int64_t rank = 0;
  int64_t size = 0;
  int64_t pid = 0;
  std::string host;
  std::string comm;
  std::string reason;
  int64_t dumped_ns = 0;
  std::vector<OpRecord> ops;  // oldest first
};

// Parses a dump; rejects other formats and versions with a message that says which.
absl::StatusOr<RankDump> ParseDump(absl::string_view text, absl::string_view source);

}  // namespace weft::trace
