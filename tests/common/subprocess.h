// Running a real program from a test: argv, extra environment, a hard time limit, and its
// combined output. Tests of multi-process behaviour start jobs through this, so a hung job
// becomes a failed test with its output instead of a hung test suite.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace weft::testing {

struct ProcessResult {
  int exit_code = -1;  // exit status, or 128 + signal
  bool timed_out = false;
  std::string output;  // stdout and stderr interleaved as written
};

// Starts argv[0] (searched in PATH) with the current environment plus `env` (NAME=VALUE
// overrides), kills its whole process group with SIGKILL after `limit`.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         std::chrono::milliseconds limit);

}  // namespace weft::testing
