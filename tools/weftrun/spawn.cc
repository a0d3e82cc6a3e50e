#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace weft::launcher {
namespace {

// What the child was doing when it failed; sent to the parent with errno.
enum ChildStep : int { kJoinGroup, kSetDeathSignal, kRedirect, kBind, kExec };

struct ChildReport {
  int step;
  int error;
};

[[noreturn]] void ReportAndExit(int report_fd, int step) {
  const ChildReport report{step, errno};
  ssize_t ignored = write(report_fd, &report, sizeof(report));
  (void)ignored;  // the parent takes a short report for a failure all the same
  _exit(127);
}

// Runs in the child between fork() and exec: the parent has threads (the rendezvous store), so
// only async-signal-safe calls are allowed here, and every buffer was prepared before fork().
[[noreturn]] void RunChild(pid_t parent, int report_fd, int stdin_fd, int stdout_fd, int stderr_fd,
                           const char* path, char* const* argv, char* const* envp,
                           const cpu_set_t* affinity) {
  if (setpgid(0, 0) != 0) ReportAndExit(report_fd, kJoinGroup);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ReportAndExit(report_fd, kSetDeathSignal);
  // The launcher may have died before prctl() took effect; then nobody would kill us later.
  if (getppid() != parent) _exit(127);
  if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(stderr_fd, STDERR_FILENO) < 0) {
    ReportAndExit(report_fd, kRedirect);
  }
  // Descriptors the launcher inherited or opened without O_CLOEXEC would stay open in every rank
  // and could hold another rank's pipe open past its exit. Best effort: older kernels lack it.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (affinity != nullptr && sched_setaffinity(0, sizeof(*affinity), affinity) != 0) {
    ReportAndExit(report_fd, kBind);
  }

  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  execve(path, argv, envp);
  ReportAndExit(report_fd, kExec);
}

std::string DescribeFailure(const std::string& path, const ChildReport& report) {
  const char* step = report.step == kJoinGroup        ? "creating the rank's process group"
                     : report.step == kSetDeathSignal ? "tying the rank's life to weftrun's"
                     : report.step == kRedirect       ? "connecting the rank's stdio"
                     : report.step == kBind           ? "binding the rank to its CPUs (WEFT_BIND)"
                                                      : nullptr;
  if (step != nullptr) {
    return absl::StrCat("cannot run '", path, "': ", step, " failed: ", strerror(report.error));
  }
  return absl::StrCat(
      "cannot run '", path, "': ", strerror(report.error),
      report.error == ENOEXEC ? " (a script needs a '#!' first line naming its interpreter)" : "");
}

std::vector<char*> PointersTo(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

// Waits for the child to execute the program. The report pipe's write end closes on exec (EOF:
// success) or carries a ChildReport.
absl::Status AwaitExec(pid_t pid, int report_fd, const std::string& path,
                       const Deadline& deadline) {
  ChildReport report{};
  size_t got = 0;
  while (true) {
    pollfd pfd{report_fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, deadline.PollTimeoutMs(1000));
    if (ready < 0 && errno != EINTR) return Errno("waiting for a rank to start: poll");
    if (ready > 0) {
      const ssize_t n =
          read(report_fd, reinterpret_cast<char*>(&report) + got, sizeof(report) - got);
      if (n == 0) break;
      if (n > 0) got += static_cast<size_t>(n);
      if (n < 0 && errno != EINTR) return Errno("waiting for a rank to start: read");
      if (got == sizeof(report)) break;
      continue;
    }
    if (absl::Status s = deadline.Check(absl::StrCat("starting '", path, "' (pid ", pid, ")"));
        !s.ok()) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return s;
    }
  }
  if (got == 0) return absl::OkStatus();
  // The child exits right after reporting.
  waitpid(pid, nullptr, 0);
  if (got < sizeof(report)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run '", path, "': the process exited before executing it"));
  }
  return absl::FailedPreconditionError(DescribeFailure(path, report));
}

}  // namespace

absl::StatusOr<std::string> ResolveProgram(const std::string& program) {
  auto check = [](const std::string& path) -> absl::Status {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot run '", path, "': ", strerror(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot run '", path, "': it is a directory"));
    }
    if (access(path.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot run '", path, "': ", strerror(errno), " (not executable)"));
    }
    return absl::OkStatus();
  };
  if (program.find('/') != std::string::npos) {
    if (absl::Status s = check(program); !s.ok()) return s;
    return program;
  }
  const char* path_env = getenv("PATH");
  const std::string search = path_env != nullptr && *path_env != '\0' ? path_env : "/bin:/usr/bin";
  absl::Status first_problem;  // a match that is not executable beats "not found"
  for (absl::string_view dir : absl::StrSplit(search, ':')) {
    const std::string candidate =
        dir.empty() ? program : absl::StrCat(dir, dir.back() == '/' ? "" : "/", program);
    struct stat st;
    if (stat(candidate.c_str(), &st) != 0) continue;
    absl::Status s = check(candidate);
    if (s.ok()) return candidate;
    if (first_problem.ok()) first_problem = s;
  }
  if (!first_problem.ok()) return first_problem;
  return absl::FailedPreconditionError(
      absl::StrCat("cannot run '", program, "': not found in PATH (", search, ")"));
}

absl::StatusOr<RankProcess> SpawnRank(const std::string& path, const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, const Deadline& deadline,
                                      const cpu_set_t* affinity) {
  std::vector<char*> argv_ptrs = PointersTo(argv);
  std::vector<char*> env_ptrs = PointersTo(env);

  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int report[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    absl::Status s = Errno("creating a rank's pipes (raise 'ulimit -n' for many ranks)");
    CloseAll({out[0], out[1], err[0], err[1], report[0], report[1]});
    return s;
  }
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    absl::Status s = Errno("opening /dev/null for a rank's stdin");
    CloseAll({out[0], out[1], err[0], err[1], report[0], report[1]});
    return s;
  }

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    RunChild(parent, report[1], devnull, out[1], err[1], path.c_str(), argv_ptrs.data(),
             env_ptrs.data(), affinity);
  }
  const int fork_errno = errno;
  CloseAll({out[1], err[1], report[1], devnull});
  if (pid < 0) {
    CloseAll({out[0], err[0], report[0]});
    errno = fork_errno;
    return Errno("fork for a rank");
  }

  absl::Status started = AwaitExec(pid, report[0], path, deadline);
  close(report[0]);
  if (!started.ok()) {
    CloseAll({out[0], err[0]});
    return started;
  }
  for (int fd : {out[0], err[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return RankProcess{pid, out[0], err[0]};
}

}  // namespace weft::launcher
