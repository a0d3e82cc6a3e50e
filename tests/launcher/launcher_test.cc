// End-to-end tests of weftrun: the real binary, with /bin/sh scripts (and store_probe) as ranks.
//
// Every run of weftrun is bounded: Launcher::Wait kills it (and, through PR_SET_PDEATHSIG, its
// ranks) when its bound passes, and the test then fails.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backoff.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "temp_dir.h"
#include "time_scale.h"

extern char** environ;

namespace {

using weft::testing::Scaled;
using weft::testing::TimeScale;

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct Finished {
  int status = -1;  // as from waitpid()
  std::string out;
  std::string err;
  absl::Duration elapsed;
};

std::string Describe(const Finished& f) {
  return absl::StrCat("wait status ", f.status, " after ", absl::FormatDuration(f.elapsed),
                      "\n--- stdout ---\n", f.out.substr(0, 4000), "\n--- stderr ---\n",
                      f.err.substr(0, 4000));
}

int ExitCode(const Finished& f) { return WIFEXITED(f.status) ? WEXITSTATUS(f.status) : -1; }

// One run of weftrun with its stdout and stderr captured.
class Launcher {
 public:
  // `env_changes`: "NAME=value" sets NAME, a bare "NAME" removes it from the inherited environment.
  explicit Launcher(const std::vector<std::string>& args,
                    const std::vector<std::string>& env_changes = {}) {
    std::vector<std::string> argv = {WEFTRUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const absl::string_view name =
          absl::string_view(*entry).substr(0, absl::string_view(*entry).find('='));
      const bool changed = std::any_of(
          env_changes.begin(), env_changes.end(),
          [&](const std::string& change) { return change.substr(0, change.find('=')) == name; });
      if (!changed) env.push_back(*entry);
    }
    for (const std::string& change : env_changes) {
      if (change.find('=') != std::string::npos) env.push_back(change);
    }
    std::vector<char*> argv_ptrs, env_ptrs;
    for (std::string& s : argv) argv_ptrs.push_back(s.data());
    for (std::string& s : env) env_ptrs.push_back(s.data());
    argv_ptrs.push_back(nullptr);
    env_ptrs.push_back(nullptr);

    int out[2], err[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
    const pid_t parent = getpid();
    started_ = absl::Now();
    pid_ = fork();
    if (pid_ == 0) {
      // If the test dies, weftrun dies with it, and its ranks with weftrun.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);
      const int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      execve(WEFTRUN_PATH, argv_ptrs.data(), env_ptrs.data());
      _exit(126);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }

  ~Launcher() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    CloseOut();
    CloseErr();
  }

  pid_t pid() const { return pid_; }

  // Stops reading weftrun's stdout: its next write there fails with EPIPE.
  void CloseOut() {
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }

  // Collects output until `needle` occurs `count` times in stdout; false if `bound` passes first.
  bool WaitForStdout(absl::string_view needle, int count, absl::Duration bound) {
    const absl::Time until = absl::Now() + bound;
    while (Occurrences(result_.out, needle) < count) {
      if (absl::Now() >= until || !Pump(until)) return false;
    }
    return true;
  }

  // Waits for weftrun to exit; kills it when `bound` passes.
  Finished Wait(absl::Duration bound) {
    const absl::Time until = absl::Now() + bound;
    while ((out_fd_ >= 0 || err_fd_ >= 0) && absl::Now() < until) Pump(until);
    weft::Backoff backoff;
    while (pid_ > 0) {
      const pid_t done = waitpid(pid_, &result_.status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
      } else if (absl::Now() >= until) {
        ADD_FAILURE() << "weftrun did not finish within " << absl::FormatDuration(bound)
                      << "; killing it";
        kill(pid_, SIGKILL);
        waitpid(pid_, &result_.status, 0);
        pid_ = -1;
      } else {
        backoff.Pause();
      }
    }
    result_.elapsed = absl::Now() - started_;
    return result_;
  }

 private:
  static int Occurrences(absl::string_view text, absl::string_view needle) {
    int n = 0;
    for (size_t at = text.find(needle); at != absl::string_view::npos;
         at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }

  void CloseErr() {
    if (err_fd_ >= 0) close(err_fd_);
    err_fd_ = -1;
  }

  // One poll() round over the open pipes; false once both are closed.
  bool Pump(absl::Time until) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (out_fd_ < 0 && err_fd_ < 0) return false;
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(until - absl::Now()) + 1);
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(ms, 1000))) <= 0) return true;
    char buffer[1 << 16];
    if (fds[0].revents != 0) {
      const ssize_t n = read(out_fd_, buffer, sizeof(buffer));
      if (n > 0) result_.out.append(buffer, n);
      if (n == 0 || (n < 0 && errno != EINTR)) CloseOut();
    }
    if (fds[1].revents != 0) {
      const ssize_t n = read(err_fd_, buffer, sizeof(buffer));
      if (n > 0) result_.err.append(buffer, n);
      if (n == 0 || (n < 0 && errno != EINTR)) CloseErr();
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  absl::Time started_;
  Finished result_;
};

Finished RunWeftrun(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                    absl::Duration bound = Scaled(absl::Seconds(10))) {
  return Launcher(args, env).Wait(bound);
}

std::vector<std::string> Lines(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// "a=1 b=2" -> {a: 1, b: 2}
std::map<std::string, std::string> Fields(absl::string_view line) {
  std::map<std::string, std::string> fields;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
    fields[kv.first] = kv.second;
  }
  return fields;
}

// The values of "NAME=<pid>" words in `text`.
std::vector<pid_t> Pids(absl::string_view text, absl::string_view name) {
  std::vector<pid_t> pids;
  for (const std::string& line : Lines(text)) {
    for (const auto& [key, value] : Fields(line)) {
      pid_t pid = 0;
      if (key == name && absl::SimpleAtoi(value, &pid)) pids.push_back(pid);
    }
  }
  return pids;
}

// Dead or a zombie: a killed orphan waits for whatever reaps orphans here.
bool Alive(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string contents((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = contents.rfind(')');
  if (paren == std::string::npos || paren + 2 >= contents.size()) return false;
  const char state = contents[paren + 2];
  return state != 'Z' && state != 'X';
}

// Whether all of `pids` are gone within `bound`.
bool AllGone(const std::vector<pid_t>& pids, absl::Duration bound) {
  const absl::Time until = absl::Now() + bound;
  weft::Backoff backoff;
  while (std::any_of(pids.begin(), pids.end(), Alive)) {
    if (absl::Now() >= until) return false;
    backoff.Pause();
  }
  return true;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(LauncherTest, EveryRankGetsItsIdentityAndTheStoreAddress) {
  const Finished f =
      RunWeftrun({"-n", "3", "--", "/bin/sh", "-c",
                  "echo rank=$WEFT_RANK size=$WEFT_SIZE local=$WEFT_LOCAL_RANK"
                  " local_size=$WEFT_LOCAL_SIZE node=$WEFT_NODE_RANK addr=$WEFT_ADDR"
                  " port=$WEFT_PORT token=$WEFT_TOKEN torch_rank=${RANK-unset}"
                  " torch_size=${WORLD_SIZE-unset} kept=$KEPT_VARIABLE"},
                 {"WEFT_TOKEN", "WEFT_RANK=99", "RANK", "WORLD_SIZE", "KEPT_VARIABLE=yes"});
  ASSERT_EQ(ExitCode(f), 0) << Describe(f);
  EXPECT_EQ(f.err, "");
  const std::vector<std::string> lines = Lines(f.out);
  ASSERT_EQ(lines.size(), 3u) << Describe(f);
  std::set<int> ranks;
  std::set<std::string> ports, tokens;
  for (const std::string& line : lines) {
    ASSERT_EQ(line.substr(0, 1), "[") << line;
    int rank = -1;
    ASSERT_TRUE(absl::SimpleAtoi(line.substr(1, 1), &rank)) << line;
    ASSERT_EQ(line.substr(2, 2), "] ") << line;
    std::map<std::string, std::string> fields = Fields(line.substr(4));
    EXPECT_EQ(fields["rank"], absl::StrCat(rank)) << line;
    EXPECT_EQ(fields["size"], "3") << line;
    EXPECT_EQ(fields["local"], absl::StrCat(rank)) << line;
    EXPECT_EQ(fields["local_size"], "3") << line;
    EXPECT_EQ(fields["node"], "0") << line;
    EXPECT_EQ(fields["addr"], "127.0.0.1") << line;
    EXPECT_EQ(fields["torch_rank"], "unset") << line;
    EXPECT_EQ(fields["torch_size"], "unset") << line;
    EXPECT_EQ(fields["kept"], "yes") << line;
    int port = 0;
    EXPECT_TRUE(absl::SimpleAtoi(fields["port"], &port) && port > 0) << line;
    EXPECT_EQ(fields["token"].size(), 32u) << line;
    ranks.insert(rank);
    ports.insert(fields["port"]);
    tokens.insert(fields["token"]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(ports.size(), 1u) << "ranks disagree on the store's port";
  EXPECT_EQ(tokens.size(), 1u) << "ranks disagree on the token";
}

TEST(LauncherTest, TokenComesFromTheEnvironmentAndTagsArePadded) {
  const Finished f = RunWeftrun({"--nproc_per_node=11", "/bin/sh", "-c", "echo token=$WEFT_TOKEN"},
                                {"WEFT_TOKEN=launcher-test-secret"});
  ASSERT_EQ(ExitCode(f), 0) << Describe(f);
  std::vector<std::string> lines = Lines(f.out);
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 11u) << Describe(f);
  EXPECT_EQ(lines[0], "[ 0] token=launcher-test-secret");
  EXPECT_EQ(lines[9], "[ 9] token=launcher-test-secret");
  EXPECT_EQ(lines[10], "[10] token=launcher-test-secret");
}

TEST(LauncherTest, RanksRendezvousThroughTheLaunchersStore) {
  const Finished f = RunWeftrun({"-n", "3", STORE_PROBE_PATH});
  ASSERT_EQ(ExitCode(f), 0) << Describe(f);
  std::vector<std::string> lines = Lines(f.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] gathered 0@0,1@0,2@0", "[1] gathered 0@0,1@0,2@0",
                                             "[2] gathered 0@0,1@0,2@0"}))
      << Describe(f);
}

TEST(LauncherTest, TwoNodesMeetAtNodeZerosStoreWhichOutlivesTheirRanks) {
  const std::string port = absl::StrCat(FreePort());
  const std::vector<std::string> env = {"WEFT_TOKEN=two-node-test-secret"};
  // Node 1 starts first: its ranks retry until node 0's store is up. They also use the store
  // 300 ms after node 0's ranks have ended, so node 0's launcher must wait for them.
  Launcher node1({"--nnodes", "2", "--node_rank", "1", "--master_addr", "127.0.0.1",
                  "--master_port", port, "-n", "2", STORE_PROBE_PATH, "300"},
                 env);
  Launcher node0(
      {"--nnodes=2", "--node-rank=0", "--master-port", port, "-n", "2", STORE_PROBE_PATH}, env);
  const Finished f0 = node0.Wait(Scaled(absl::Seconds(15)));
  const Finished f1 = node1.Wait(Scaled(absl::Seconds(15)));
  ASSERT_EQ(ExitCode(f0), 0) << Describe(f0);
  ASSERT_EQ(ExitCode(f1), 0) << Describe(f1);
  std::vector<std::string> lines0 = Lines(f0.out), lines1 = Lines(f1.out);
  std::sort(lines0.begin(), lines0.end());
  std::sort(lines1.begin(), lines1.end());
  EXPECT_EQ(lines0, (std::vector<std::string>{"[0] gathered 0@0,1@0,2@1,3@1",
                                              "[1] gathered 0@0,1@0,2@1,3@1"}));
  EXPECT_EQ(lines1, (std::vector<std::string>{"[2] gathered 0@0,1@0,2@1,3@1", "[2] still there",
                                              "[3] gathered 0@0,1@0,2@1,3@1", "[3] still there"}));
  EXPECT_THAT(f0.err, HasSubstr("keeping the rendezvous store up until the other nodes' ranks"));
  EXPECT_EQ(f1.err, "");
}

TEST(LauncherTest, FailureOnNodeZeroDoesNotLeaveOtherNodesWaiting) {
  const std::string port = absl::StrCat(FreePort());
  const std::vector<std::string> env = {"WEFT_TOKEN=two-node-test-secret"};
  Launcher node1(
      {"--nnodes", "2", "--node-rank", "1", "--master-port", port, "-n", "2", STORE_PROBE_PATH},
      env);
  Launcher node0({"--nnodes", "2", "--node-rank", "0", "--master-port", port, "-n", "2", "/bin/sh",
                  "-c", "sleep 0.3; exit 5"},
                 env);
  const Finished f0 = node0.Wait(Scaled(absl::Seconds(15)));
  const Finished f1 = node1.Wait(Scaled(absl::Seconds(15)));
  EXPECT_EQ(ExitCode(f0), 5) << Describe(f0);
  EXPECT_LT(f0.elapsed, Scaled(absl::Seconds(3))) << Describe(f0);
  EXPECT_EQ(ExitCode(f1), 1) << Describe(f1);
  EXPECT_LT(f1.elapsed, Scaled(absl::Seconds(5))) << Describe(f1);
  // Either rank of node 1 may be the first to report; weftrun then stops the other.
  EXPECT_THAT(f1.err,
              ContainsRegex("store_probe: rank [23]: waiting for rank 0 to publish 'probe'"));
}

TEST(LauncherTest, UsageErrorsExitTwoAndHelpExitsZero) {
  const Finished no_n = RunWeftrun({"/bin/true"});
  EXPECT_EQ(ExitCode(no_n), 2) << Describe(no_n);
  EXPECT_THAT(no_n.err, HasSubstr("-n N"));

  const Finished unknown = RunWeftrun({"-n", "1", "--frobnicate", "/bin/true"});
  EXPECT_EQ(ExitCode(unknown), 2) << Describe(unknown);
  EXPECT_THAT(unknown.err, HasSubstr("unknown option '--frobnicate'"));

  const Finished no_token = RunWeftrun(
      {"--nnodes", "2", "--master-port", "29500", "-n", "1", "/bin/true"}, {"WEFT_TOKEN"});
  EXPECT_EQ(ExitCode(no_token), 2) << Describe(no_token);
  EXPECT_THAT(no_token.err, HasSubstr("WEFT_TOKEN"));

  const Finished no_port =
      RunWeftrun({"--nnodes", "2", "-n", "1", "/bin/true"}, {"WEFT_TOKEN=secret"});
  EXPECT_EQ(ExitCode(no_port), 2) << Describe(no_port);
  EXPECT_THAT(no_port.err, HasSubstr("--master-port"));

  const Finished help = RunWeftrun({"--help"});
  EXPECT_EQ(ExitCode(help), 0) << Describe(help);
  EXPECT_THAT(help.out, HasSubstr("Usage: weftrun -n N"));
}

TEST(LauncherTest, FailingRankStopsTheOthers) {
  const Finished f = RunWeftrun({"-n", "4", "/bin/sh", "-c",
                                 "echo pid=$$; if [ $WEFT_RANK = 1 ]; then sleep 0.2; exit 3; fi;"
                                 " exec sleep 30"});
  EXPECT_EQ(ExitCode(f), 3) << Describe(f);
  EXPECT_LT(f.elapsed, Scaled(absl::Seconds(5))) << Describe(f);
  const std::vector<pid_t> pids = Pids(f.out, "pid");
  ASSERT_EQ(pids.size(), 4u) << Describe(f);
  std::string rank1_pid;
  for (const std::string& line : Lines(f.out)) {
    if (absl::StartsWith(line, "[1] pid=")) rank1_pid = line.substr(8);
  }
  EXPECT_EQ(f.err, absl::StrCat("weftrun: rank 1 (pid ", rank1_pid,
                                ") exited with status 3; stopping the other 3 ranks\n"));
  EXPECT_TRUE(AllGone(pids, Scaled(absl::Seconds(2))));
}

TEST(LauncherTest, RankKilledBySignalIsNamed) {
  const Finished f =
      RunWeftrun({"-n", "2", "/bin/sh", "-c",
                  "if [ $WEFT_RANK = 0 ]; then sleep 0.2; kill -KILL $$; fi; exec sleep 30"});
  EXPECT_EQ(ExitCode(f), 128 + SIGKILL) << Describe(f);
  EXPECT_LT(f.elapsed, Scaled(absl::Seconds(5))) << Describe(f);
  EXPECT_THAT(f.err, HasSubstr("weftrun: rank 0 (pid "));
  EXPECT_THAT(f.err, HasSubstr(") was killed by signal 9 (SIGKILL); stopping the other rank\n"));
}

TEST(LauncherTest, RankIgnoringSigtermIsKilledAfterTheGrace) {
  const weft::testing::TempDir temp("weftrun-test");
  const std::string& dir = temp.path();
  const Finished f =
      RunWeftrun({"-n", "2", "--timeout", absl::StrCat(20 * TimeScale()), "/bin/sh", "-c",
                  absl::StrCat("if [ $WEFT_RANK = 0 ]; then"
                               "  while [ ! -e ",
                               dir,
                               "/ready ]; do sleep 0.02; done;"
                               "  exit 1;"
                               " fi;"
                               " trap '' TERM; echo pid=$$; touch ",
                               dir,
                               "/ready;"
                               " exec sleep 30")});
  EXPECT_EQ(ExitCode(f), 1) << Describe(f);
  EXPECT_GE(f.elapsed, absl::Seconds(2.5)) << Describe(f);
  EXPECT_LT(f.elapsed, Scaled(absl::Seconds(8))) << Describe(f);
  EXPECT_THAT(f.err, HasSubstr("exited with status 1; stopping the other rank\n"));
  EXPECT_THAT(f.err, HasSubstr("weftrun: 1 rank still running 3s after SIGTERM; killing them\n"));
  EXPECT_TRUE(AllGone(Pids(f.out, "pid"), Scaled(absl::Seconds(2))));
  unlink(absl::StrCat(dir, "/ready").c_str());
  rmdir(dir.c_str());
}

TEST(LauncherTest, TimeoutStopsTheJobAndNamesTheRanksStillRunning) {
  const Finished f = RunWeftrun({"--timeout", "0.5", "-n", "3", "/bin/sh", "-c",
                                 "[ $WEFT_RANK = 1 ] && exit 0; echo pid=$$; exec sleep 30"});
  EXPECT_EQ(ExitCode(f), 124) << Describe(f);
  EXPECT_GE(f.elapsed, absl::Milliseconds(500)) << Describe(f);
  EXPECT_LT(f.elapsed, Scaled(absl::Seconds(4))) << Describe(f);
  EXPECT_EQ(f.err,
            "weftrun: --timeout 500ms expired with 2 of 3 ranks still running "
            "(ranks 0, 2); stopping them\n");
  EXPECT_TRUE(AllGone(Pids(f.out, "pid"), Scaled(absl::Seconds(2))));
}

TEST(LauncherTest, ProgramThatCannotRunExits127) {
  const Finished missing = RunWeftrun({"-n", "2", "/nonexistent/weft-program"});
  EXPECT_EQ(ExitCode(missing), 127) << Describe(missing);
  EXPECT_EQ(missing.err,
            "weftrun: cannot run '/nonexistent/weft-program': No such file or directory\n");

  const Finished not_in_path =
      RunWeftrun({"-n", "2", "weft-program-that-does-not-exist"}, {"PATH=/usr/bin:/bin"});
  EXPECT_EQ(ExitCode(not_in_path), 127) << Describe(not_in_path);
  EXPECT_EQ(not_in_path.err,
            "weftrun: cannot run 'weft-program-that-does-not-exist': "
            "not found in PATH (/usr/bin:/bin)\n");

  const weft::testing::TempDir temp("weftrun-test");
  const std::string& dir = temp.path();
  const std::string plain = dir + "/plain";
  const std::string no_interpreter = dir + "/no-interpreter";
  std::ofstream(plain) << "echo hello\n";
  std::ofstream(no_interpreter) << "\x7f"
                                   "ELF-but-not-really\n";
  chmod(plain.c_str(), 0644);
  chmod(no_interpreter.c_str(), 0755);

  const Finished not_executable = RunWeftrun({"-n", "2", plain});
  EXPECT_EQ(ExitCode(not_executable), 127) << Describe(not_executable);
  EXPECT_THAT(not_executable.err, HasSubstr("(not executable)"));

  // Passes the launcher's checks and fails in execve(): reported from the child.
  const Finished bad_format = RunWeftrun({"-n", "2", no_interpreter});
  EXPECT_EQ(ExitCode(bad_format), 127) << Describe(bad_format);
  EXPECT_EQ(bad_format.err, absl::StrCat("weftrun: cannot run '", no_interpreter,
                                         "': Exec format error (a script needs a '#!' first "
                                         "line naming its interpreter)\n"));
  unlink(plain.c_str());
  unlink(no_interpreter.c_str());
  rmdir(dir.c_str());
}

TEST(LauncherTest, LinesOfConcurrentRanksNeverInterleave) {
  // Line lengths up to twice a pipe's atomic write size, so that the launcher's reads split
  // lines and the ranks' writes arrive in pieces.
  constexpr int kRanks = 4;
  constexpr int kLines = 1000;
  constexpr int kMaxPayload = 9000;
  auto payload_length = [](int line) { return line * 37 % kMaxPayload; };
  const Finished f =
      RunWeftrun({"-n", absl::StrCat(kRanks), "/bin/sh", "-c",
                  absl::StrCat("x=", std::string(kMaxPayload, 'x'), "; i=0; while [ $i -lt ",
                               kLines, " ]; do printf \"rank %s line %s %.$((i * 37 % ",
                               kMaxPayload, "))s\\n\" $WEFT_RANK $i $x; i=$((i + 1)); done")});
  ASSERT_EQ(ExitCode(f), 0) << Describe(f).substr(0, 2000);
  const std::vector<std::string> lines = Lines(f.out);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kRanks * kLines));
  std::vector<int> next(kRanks, 0);
  for (const std::string& line : lines) {
    int rank = -1;
    ASSERT_TRUE(line.size() > 4 && absl::SimpleAtoi(line.substr(1, 1), &rank) && rank >= 0 &&
                rank < kRanks)
        << line.substr(0, 100);
    const int i = next[rank]++;
    ASSERT_EQ(line, absl::StrCat("[", rank, "] rank ", rank, " line ", i, " ",
                                 std::string(payload_length(i), 'x')))
        << line.substr(0, 100);
  }
  EXPECT_EQ(next, std::vector<int>(kRanks, kLines));
}

TEST(LauncherTest, StdoutAndStderrStaySeparate) {
  const Finished f =
      RunWeftrun({"-n", "2", "/bin/sh", "-c",
                  "echo out-$WEFT_RANK; echo err-$WEFT_RANK >&2; printf tail-$WEFT_RANK"});
  ASSERT_EQ(ExitCode(f), 0) << Describe(f);
  std::vector<std::string> out = Lines(f.out), err = Lines(f.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[0] out-0", "[0] tail-0", "[1] out-1", "[1] tail-1"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[0] err-0", "[1] err-1"}));

  const Finished bare = RunWeftrun(
      {"--no-prefix", "-n", "1", "/bin/sh", "-c", "echo out; echo err >&2; printf tail"});
  ASSERT_EQ(ExitCode(bare), 0) << Describe(bare);
  EXPECT_EQ(bare.out, "out\ntail");
  EXPECT_EQ(bare.err, "err\n");
}

TEST(LauncherTest, SigtermToTheLauncherReachesEveryProcessOfEveryRank) {
  Launcher launcher({"-n", "3", "/bin/sh", "-c", "sleep 30 & echo child=$!; wait"});
  ASSERT_TRUE(launcher.WaitForStdout("child=", 3, Scaled(absl::Seconds(5))));
  ASSERT_EQ(kill(launcher.pid(), SIGTERM), 0);
  const Finished f = launcher.Wait(Scaled(absl::Seconds(5)));
  ASSERT_TRUE(WIFSIGNALED(f.status)) << Describe(f);
  EXPECT_EQ(WTERMSIG(f.status), SIGTERM);
  EXPECT_THAT(f.err, HasSubstr("weftrun: received SIGTERM; passing it to the 3 running ranks"));
  EXPECT_THAT(f.err, Not(HasSubstr("rank 0 (pid")));  // told to stop: not reported as failures
  const std::vector<pid_t> children = Pids(f.out, "child");
  ASSERT_EQ(children.size(), 3u) << Describe(f);
  EXPECT_TRUE(AllGone(children, Scaled(absl::Seconds(2))));
}

TEST(LauncherTest, SecondSigintKillsRanksThatSurviveTheFirst) {
  Launcher launcher({"-n", "2", "/bin/sh", "-c",
                     "trap 'echo interrupted' INT; echo pid=$$;"
                     " while :; do sleep 0.05; done"});
  ASSERT_TRUE(launcher.WaitForStdout("pid=", 2, Scaled(absl::Seconds(5))));
  ASSERT_EQ(kill(launcher.pid(), SIGINT), 0);
  ASSERT_TRUE(launcher.WaitForStdout("interrupted", 2, Scaled(absl::Seconds(5))));
  ASSERT_EQ(kill(launcher.pid(), SIGINT), 0);
  const Finished f = launcher.Wait(Scaled(absl::Seconds(5)));
  ASSERT_TRUE(WIFSIGNALED(f.status)) << Describe(f);
  EXPECT_EQ(WTERMSIG(f.status), SIGINT);
  EXPECT_THAT(f.err, HasSubstr("weftrun: received SIGINT again; killing the 2 running ranks"));
  EXPECT_TRUE(AllGone(Pids(f.out, "pid"), Scaled(absl::Seconds(2))));
}

TEST(LauncherTest, RanksDieWhenTheLauncherIsKilledOutright) {
  Launcher launcher({"-n", "2", "/bin/sh", "-c", "echo pid=$$; exec sleep 30"});
  ASSERT_TRUE(launcher.WaitForStdout("pid=", 2, Scaled(absl::Seconds(5))));
  ASSERT_EQ(kill(launcher.pid(), SIGKILL), 0);
  const Finished f = launcher.Wait(Scaled(absl::Seconds(5)));
  const std::vector<pid_t> pids = Pids(f.out, "pid");
  ASSERT_EQ(pids.size(), 2u) << Describe(f);
  EXPECT_TRUE(AllGone(pids, Scaled(absl::Seconds(2))));
}

TEST(LauncherTest, ReaderOfStdoutGoingAwayReachesTheRanks) {
  Launcher launcher({"--timeout", absl::StrCat(10 * TimeScale()), "-n", "1", "/bin/sh", "-c",
                     "echo first; while :; do echo more; sleep 0.01; done"});
  ASSERT_TRUE(launcher.WaitForStdout("first", 1, Scaled(absl::Seconds(5))));
  launcher.CloseOut();
  const Finished f = launcher.Wait(Scaled(absl::Seconds(8)));
  EXPECT_EQ(ExitCode(f), 128 + SIGPIPE) << Describe(f);
  EXPECT_THAT(f.err, HasSubstr("was killed by signal 13 (SIGPIPE)"));
  EXPECT_LT(f.elapsed, Scaled(absl::Seconds(5))) << Describe(f);
}

}  // namespace
