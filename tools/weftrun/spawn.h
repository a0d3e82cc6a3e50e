// Starting one rank: a child process that runs the program with the rank's environment, stdin
// from /dev/null, and stdout and stderr piped back to the launcher.
//
// Each rank leads a process group of its own. A terminal's Ctrl-C then reaches only the launcher,
// which passes it on exactly once to each rank's whole group, so the processes a rank started
// itself (the commands of `sh -c 'a; b'`) are signalled with it and nothing outlives the job.
// A rank dies with the launcher (PR_SET_PDEATHSIG), even when the launcher is killed outright.
// A program that cannot be executed is reported as such, through a close-on-exec pipe, instead
// of looking like a rank that ran and exited 127.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deadline.h"

namespace weft::launcher {

struct RankProcess {
  pid_t pid = -1;      // also the id of the rank's process group
  int stdout_fd = -1;  // read ends of the rank's pipes: non-blocking, close-on-exec; the caller
  int stderr_fd = -1;  // owns and closes them
};

// Finds `program` the way execvp() does: as given when it contains '/', else in the directories
// of PATH. Fails with FailedPrecondition saying why it cannot be run (absent, not executable).
absl::StatusOr<std::string> ResolveProgram(const std::string& program);

// Starts `path` (from ResolveProgram) with `argv` and exactly the environment `env` ("NAME=value"
// entries). Returns once the child has executed the program, or fails: FailedPrecondition when
// the program could not be executed (the launcher's exit status 127), any other code when the
// launcher could not create the process. `deadline` bounds the wait for the exec.
//
// With `affinity`, the child binds itself to those CPUs before the exec, so that every thread
// the program starts inherits the binding.
//
// Call it from the main thread: the kernel sends PR_SET_PDEATHSIG when the thread that forked
// the child ends, not when the process does.
absl::StatusOr<RankProcess> SpawnRank(const std::string& path, const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, const Deadline& deadline,
                                      const cpu_set_t* affinity = nullptr);

}  // namespace weft::launcher
