#include "rank_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace weft::testing {

JobOutcome RunRanks(const std::string& program, const std::string& scenario, int size,
                    const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& env,
                    absl::Duration limit) {
  // Built before fork: the test process has threads (the store), so the child only execs.
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    bool overridden = false;
    for (const auto& [name, value] : env) {
      if (std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=') {
        overridden = true;
      }
    }
    if (!overridden) env_text.emplace_back(*e);
  }
  for (const auto& [name, value] : env) env_text.push_back(absl::StrCat(name, "=", value));
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  JobOutcome job;
  job.ranks.resize(size);
  std::vector<std::string> output_paths(size);
  for (int rank = 0; rank < size; ++rank) {
    std::vector<std::string> argv_text = {program, scenario, std::to_string(rank),
                                          std::to_string(size)};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    char path[] = "/tmp/weft-fault-outputXXXXXX";
    const int fd = mkstemp(path);
    output_paths[rank] = path;
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(fd);
    job.ranks[rank].pid = pid;
  }

  const absl::Time give_up = absl::Now() + limit;
  int running = size;
  while (running > 0) {
    for (RankOutcome& rank : job.ranks) {
      if (rank.ended != absl::Time()) continue;
      int status = 0;
      if (waitpid(rank.pid, &status, WNOHANG) != rank.pid) continue;
      rank.ended = absl::Now();
      if (WIFEXITED(status)) rank.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) rank.signal = WTERMSIG(status);
      --running;
    }
    if (running > 0 && absl::Now() >= give_up) {
      job.timed_out = true;
      for (RankOutcome& rank : job.ranks) {
        if (rank.ended != absl::Time()) continue;
        kill(rank.pid, SIGKILL);
        waitpid(rank.pid, nullptr, 0);
        rank.ended = absl::Now();
        rank.signal = SIGKILL;
      }
      break;
    }
    usleep(2000);
  }
  for (int rank = 0; rank < size; ++rank) {
    std::ifstream in(output_paths[rank]);
    std::ostringstream text;
    text << in.rdbuf();
    job.ranks[rank].output = text.str();
    unlink(output_paths[rank].c_str());
  }
  return job;
}

}  // namespace weft::testing
