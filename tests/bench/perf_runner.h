// Running a *_perf tool the way users do: `weftrun -n N --no-prefix TOOL FLAGS`, with hard time
// bounds (weftrun's --timeout, then RunProcess's SIGKILL) so a hung tool fails the test.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft::testing {

using Env = std::vector<std::pair<std::string, std::string>>;

inline std::string ToolPath(const std::string& tool) {
  return absl::StrCat(PERF_DIR, "/", tool, "_perf");
}

inline ProcessResult RunTool(const std::string& tool, int ranks,
                             const std::vector<std::string>& flags, Env env = {},
                             int limit_s = 60) {
  limit_s *= TimeScale();
  std::vector<std::string> argv = {WEFTRUN,       "-n",          std::to_string(ranks),
                                   "--no-prefix", "--timeout",   std::to_string(limit_s),
                                   "--",          ToolPath(tool)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  env.emplace_back("WEFT_TIMEOUT", std::to_string(30 * TimeScale()));
  // Runs that fail on purpose dump their flight recorders: here, not in /tmp for good.
  const TempDir dumps("perf-test");
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dumps.path());
  return RunProcess(argv, env, std::chrono::seconds(limit_s + 10));
}

// A fresh path in a directory of this test process's, removed when the process exits.
inline std::string TempPath(const std::string& name) {
  static const TempDir dir("perf-test");
  static std::atomic<int> counter{0};
  return absl::StrCat(dir.path(), "/", counter++, "_", name);
}

}  // namespace weft::testing
