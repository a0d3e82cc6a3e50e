// Ranks started by the test itself with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), each writing to a real file. Unlike a launcher this lets a test act on one rank
// (stop it) while the others run. Every child carries a hard bound: alarm() survives exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft::testing {

// A TCP port that was free a moment ago, for MASTER_PORT.
int FreePort();

struct RankProcess {
  pid_t pid = -1;
  std::string output_path;  // stdout and stderr
};

// Starts argv with the current environment plus `env`, killed by SIGALRM after `limit`.
RankProcess StartRank(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      const std::string& output_path, std::chrono::seconds limit);

// The exit status (128 + signal when killed), or nothing if it is still running after `limit`.
std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds limit);

// Polls the file until it contains `text`; false after `limit`.
bool WaitForText(const std::string& path, const std::string& text, std::chrono::milliseconds limit);

std::string ReadFile(const std::string& path);

}  // namespace weft::testing
