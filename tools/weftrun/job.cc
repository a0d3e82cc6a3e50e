#include "job.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "deadline.h"
#include "line_relay.h"
#include "output_sink.h"
#include "spawn.h"

namespace weft::launcher {
namespace {

// How long a rank's pipes may stay open after the rank ended: only a process that left the
// rank's process group (a daemon) still holds them then, and its output is not the rank's.
constexpr absl::Duration kDrainGrace = absl::Seconds(1);
// How long one rank may take from fork() to executing the program.
constexpr absl::Duration kExecBound = absl::Seconds(30);
// How many ranks a message lists by number.
constexpr size_t kRanksListed = 16;

constexpr const char* kJobVariables[] = {"WEFT_RANK",       "WEFT_SIZE",      "WEFT_LOCAL_RANK",
                                         "WEFT_LOCAL_SIZE", "WEFT_NODE_RANK", "WEFT_ADDR",
                                         "WEFT_PORT",       "WEFT_TOKEN"};

// "1 rank", "3 ranks"
std::string Ranks(size_t n) { return absl::StrCat(n, n == 1 ? " rank" : " ranks"); }

// "the running rank", "the 3 running ranks"
std::string TheRunning(size_t n) {
  return n == 1 ? "the running rank" : absl::StrCat("the ", n, " running ranks");
}

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", signo);
}

// Unlike Deadline::PollTimeoutMs, no cap: with nothing scheduled only a rank's output or exit or
// a signal can wake the loop; and rounded up, so the loop never spins on 0 ms polls just before
// the time.
int PollTimeoutMs(absl::Time wake) {
  if (wake == absl::InfiniteFuture()) return -1;
  const absl::Duration left = absl::Ceil(wake - absl::Now(), absl::Milliseconds(1));
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 0, INT_MAX));
}

// One of a rank's output pipes and where its lines go.
struct Stream {
  Stream(std::string prefix, OutputSink* to) : relay(std::move(prefix)), sink(to) {}
  int fd = -1;
  LineRelay relay;
  OutputSink* sink;
};

struct Rank {
  Rank(int global_rank, const std::string& prefix, OutputSink* out_sink, OutputSink* err_sink)
      : rank(global_rank), out(prefix, out_sink), err(prefix, err_sink) {}
  int rank;
  pid_t pid = -1;
  bool running = false;
  absl::Time ended = absl::InfiniteFuture();
  Stream out;
  Stream err;
};

class Job {
 public:
  Job(const JobSpec& spec, SignalChannel& signals)
      : spec_(spec), signals_(signals), stdout_(STDOUT_FILENO), stderr_(STDERR_FILENO) {}
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  JobOutcome Run();

 private:
  void Start();
  void Supervise();
  void KillAndReapAll(absl::string_view why);

  void OnSignal(int signo);
  void Reap();
  void OnRankEnded(const Rank& rank, int status);
  void OnTime(absl::Time now);
  void OnTimeout();
  void OnSinkBroken(const OutputSink& sink);

  // Reads what `stream` has; false when it had nothing. Closes it at EOF or when `close_if_empty`.
  bool Read(Stream& stream, bool close_if_empty);
  void Close(Stream& stream, bool relay_rest);
  void SignalRunning(int signo);
  std::vector<int> RunningRanks() const;
  absl::Time NextWake() const;
  bool Done();
  void Say(absl::string_view line);
  void SetOutcome(JobOutcome outcome) {
    if (!outcome_.has_value()) outcome_ = outcome;
  }

  const JobSpec& spec_;
  SignalChannel& signals_;
  OutputSink stdout_;
  OutputSink stderr_;
  std::vector<Rank> ranks_;
  std::optional<JobOutcome> outcome_;  // the first reason the job ended wins
  bool stopping_ = false;              // ranks ending from now on were told to stop: not failures
  bool passed_signal_ = false;         // a signal was passed on; the next one escalates to SIGKILL
  bool drop_output_ = false;           // stop relaying and end as soon as no rank runs
  absl::Time timeout_at_;
  bool timed_out_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();  // end of the grace after SIGTERM
};

Job::~Job() {
  for (Rank& rank : ranks_) {
    for (Stream* stream : {&rank.out, &rank.err}) Close(*stream, false);
  }
}

JobOutcome Job::Run() {
  timeout_at_ = absl::Now() + spec_.timeout;
  Start();
  Supervise();
  return outcome_.value_or(JobOutcome{});
}

void Job::Start() {
  std::vector<std::string> base_env;
  for (const std::string& entry : spec_.environment) {
    const bool replaced = std::any_of(
        std::begin(kJobVariables), std::end(kJobVariables),
        [&](const char* name) { return absl::StartsWith(entry, absl::StrCat(name, "=")); });
    if (!replaced) base_env.push_back(entry);
  }
  const int width = static_cast<int>(absl::StrCat(spec_.world_size - 1).size());
  ranks_.reserve(spec_.local_size);
  for (int local = 0; local < spec_.local_size; ++local) {
    const int global = spec_.first_rank + local;
    std::vector<std::string> env = base_env;
    env.push_back(absl::StrCat("WEFT_RANK=", global));
    env.push_back(absl::StrCat("WEFT_SIZE=", spec_.world_size));
    env.push_back(absl::StrCat("WEFT_LOCAL_RANK=", local));
    env.push_back(absl::StrCat("WEFT_LOCAL_SIZE=", spec_.local_size));
    env.push_back(absl::StrCat("WEFT_NODE_RANK=", spec_.node_rank));
    env.push_back(absl::StrCat("WEFT_ADDR=", spec_.store_addr));
    env.push_back(absl::StrCat("WEFT_PORT=", spec_.store_port));
    env.push_back(absl::StrCat("WEFT_TOKEN=", spec_.token));

    absl::StatusOr<RankProcess> process =
        SpawnRank(spec_.program, spec_.argv, env, Deadline::In(kExecBound),
                  static_cast<size_t>(local) < spec_.affinity.size() && spec_.affinity[local]
                      ? &*spec_.affinity[local]
                      : nullptr);
    if (!process.ok()) {
      const bool cannot_execute = absl::IsFailedPrecondition(process.status());
      SetOutcome({cannot_execute ? kExitCannotExecute : kExitLauncherError, 0});
      stopping_ = true;
      const std::vector<int> started = RunningRanks();
      Say(absl::StrCat("weftrun: ", cannot_execute ? "" : absl::StrCat("rank ", global, ": "),
                       process.status().message(),
                       started.empty() ? ""
                                       : absl::StrCat("; killing the ", Ranks(started.size()),
                                                      " already started")));
      SignalRunning(SIGKILL);
      return;
    }
    const std::string prefix =
        spec_.prefix_output ? absl::StrFormat("[%*d] ", width, global) : std::string();
    Rank& rank = ranks_.emplace_back(global, prefix, &stdout_, &stderr_);
    rank.pid = process->pid;
    rank.running = true;
    rank.out.fd = process->stdout_fd;
    rank.err.fd = process->stderr_fd;
  }
}

void Job::Supervise() {
  std::vector<pollfd> fds;
  std::vector<OutputSink*> polled_sinks;
  std::vector<Stream*> polled_streams;
  while (!Done()) {
    fds.clear();
    polled_sinks.clear();
    polled_streams.clear();
    fds.push_back({signals_.fd(), POLLIN, 0});
    for (OutputSink* sink : {&stdout_, &stderr_}) {
      if (!sink->HasPending()) continue;
      fds.push_back({sink->fd(), POLLOUT, 0});
      polled_sinks.push_back(sink);
    }
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0 || stream->sink->Full()) continue;
        fds.push_back({stream->fd, POLLIN, 0});
        polled_streams.push_back(stream);
      }
    }

    if (poll(fds.data(), fds.size(), PollTimeoutMs(NextWake())) < 0) {
      if (errno == EINTR) continue;
      KillAndReapAll(absl::StrCat("poll: ", strerror(errno)));
      return;
    }
    if (fds[0].revents != 0) {
      for (int signo : signals_.ReadPending()) OnSignal(signo);
    }
    for (size_t i = 0; i < polled_sinks.size(); ++i) {
      if (fds[1 + i].revents == 0) continue;
      if (!polled_sinks[i]->WriteSome()) OnSinkBroken(*polled_sinks[i]);
    }
    const size_t streams_at = 1 + polled_sinks.size();
    for (size_t i = 0; i < polled_streams.size(); ++i) {
      if (fds[streams_at + i].revents != 0 && polled_streams[i]->fd >= 0) {
        Read(*polled_streams[i], false);
      }
    }
    OnTime(absl::Now());
  }
}

// The loop cannot go on (poll() itself failed): end the ranks the blunt way, without a loop.
void Job::KillAndReapAll(absl::string_view why) {
  SetOutcome({kExitLauncherError, 0});
  SignalRunning(SIGKILL);
  for (Rank& rank : ranks_) {
    if (rank.running) waitpid(rank.pid, nullptr, 0);
    rank.running = false;
  }
  const std::string line =
      absl::StrCat("weftrun: supervising the ranks failed (", why, "); killed them\n");
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;  // nowhere left to report to
}

void Job::OnSignal(int signo) {
  if (signo == SIGCHLD) {
    Reap();
    return;
  }
  SetOutcome({128 + signo, signo});
  const std::vector<int> running = RunningRanks();
  if (running.empty()) {
    drop_output_ = true;  // only output is left, and the user asked to stop
  } else if (!passed_signal_) {
    passed_signal_ = true;
    stopping_ = true;
    Say(absl::StrCat("weftrun: received ", SignalName(signo), "; passing it to ",
                     TheRunning(running.size()), " (send it again to kill them)"));
    SignalRunning(signo);
  } else {
    Say(absl::StrCat("weftrun: received ", SignalName(signo), " again; killing ",
                     TheRunning(running.size())));
    SignalRunning(SIGKILL);
  }
}

void Job::Reap() {
  while (true) {
    siginfo_t info = {};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    const pid_t pid = info.si_pid;
    auto rank = std::find_if(ranks_.begin(), ranks_.end(),
                             [pid](const Rank& r) { return r.running && r.pid == pid; });
    // Unreaped, the rank's pid cannot be reused yet, so its process group id still names only
    // what the rank left behind. (A child we did not start, inherited across the exec that
    // started weftrun, is only reaped.)
    if (rank != ranks_.end()) kill(-pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (rank == ranks_.end()) continue;
    rank->running = false;
    rank->ended = absl::Now();
    OnRankEnded(*rank, status);
  }
}

void Job::OnRankEnded(const Rank& rank, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (stopping_) return;  // it was told to stop: a consequence, not the cause
  stopping_ = true;
  std::string how;
  if (WIFEXITED(status)) {
    SetOutcome({WEXITSTATUS(status), 0});
    how = absl::StrCat("exited with status ", WEXITSTATUS(status));
  } else {
    const int signo = WTERMSIG(status);
    SetOutcome({128 + signo, 0});
    how = absl::StrCat("was killed by signal ", signo, " (", SignalName(signo), ")",
                       WCOREDUMP(status) ? ", core dumped" : "");
  }
  const size_t others = RunningRanks().size();
  Say(absl::StrCat("weftrun: rank ", rank.rank, " (pid ", rank.pid, ") ", how,
                   others == 0   ? ""
                   : others == 1 ? "; stopping the other rank"
                                 : absl::StrCat("; stopping the other ", others, " ranks")));
  if (others > 0) {
    SignalRunning(SIGTERM);
    kill_at_ = absl::Now() + kStopGrace;
  }
}

void Job::OnTime(absl::Time now) {
  if (!timed_out_ && now >= timeout_at_) {
    timed_out_ = true;
    OnTimeout();
  }
  if (now >= kill_at_) {
    kill_at_ = absl::InfiniteFuture();
    const std::vector<int> running = RunningRanks();
    if (!running.empty()) {
      Say(absl::StrCat("weftrun: ", Ranks(running.size()), " still running ",
                       absl::FormatDuration(kStopGrace), " after SIGTERM; killing them"));
      SignalRunning(SIGKILL);
    }
  }
  for (Rank& rank : ranks_) {
    if (rank.running || now < rank.ended + kDrainGrace) continue;
    for (Stream* stream : {&rank.out, &rank.err}) {
      while (stream->fd >= 0 && !stream->sink->Full() && Read(*stream, true)) {
      }
    }
  }
}

void Job::OnTimeout() {
  const std::vector<int> running = RunningRanks();
  if (running.empty()) {
    drop_output_ = true;
    return;
  }
  SetOutcome({kExitTimedOut, 0});
  stopping_ = true;
  std::vector<int> listed(running.begin(),
                          running.begin() + std::min(running.size(), kRanksListed));
  Say(absl::StrCat("weftrun: --timeout ", absl::FormatDuration(spec_.timeout), " expired with ",
                   running.size(), " of ", ranks_.size(), " ranks still running (",
                   running.size() == 1 ? "rank " : "ranks ", absl::StrJoin(listed, ", "),
                   running.size() > listed.size() ? ", ..." : "", "); stopping them"));
  SignalRunning(SIGTERM);
  kill_at_ = absl::Now() + kStopGrace;
}

// The reader of our stdout (or stderr) went away: close the ranks' ends of those pipes too, so
// a rank writing there gets EPIPE or SIGPIPE just as it would have written to the reader itself.
void Job::OnSinkBroken(const OutputSink& sink) {
  for (Rank& rank : ranks_) {
    for (Stream* stream : {&rank.out, &rank.err}) {
      if (stream->sink == &sink) Close(*stream, false);
    }
  }
}

bool Job::Read(Stream& stream, bool close_if_empty) {
  char data[64 << 10];
  const ssize_t n = read(stream.fd, data, sizeof(data));
  if (n > 0) {
    stream.relay.Feed(absl::string_view(data, static_cast<size_t>(n)), stream.sink->queue());
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR) && !close_if_empty) return false;
  Close(stream, true);  // EOF, a read error, or nothing arrived in the drain grace
  return false;
}

void Job::Close(Stream& stream, bool relay_rest) {
  if (stream.fd < 0) return;
  if (relay_rest) stream.relay.Finish(stream.sink->queue());
  close(stream.fd);
  stream.fd = -1;
}

void Job::SignalRunning(int signo) {
  for (const Rank& rank : ranks_) {
    // The rank may have moved itself to another process group; then signal it alone.
    if (rank.running && kill(-rank.pid, signo) != 0) kill(rank.pid, signo);
  }
}

std::vector<int> Job::RunningRanks() const {
  std::vector<int> running;
  for (const Rank& rank : ranks_) {
    if (rank.running) running.push_back(rank.rank);
  }
  return running;
}

absl::Time Job::NextWake() const {
  absl::Time wake = kill_at_;
  if (!timed_out_) wake = std::min(wake, timeout_at_);
  for (const Rank& rank : ranks_) {
    if (!rank.running && (rank.out.fd >= 0 || rank.err.fd >= 0)) {
      wake = std::min(wake, rank.ended + kDrainGrace);
    }
  }
  return wake;
}

bool Job::Done() {
  if (std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; })) {
    return false;
  }
  if (drop_output_) {
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) Close(*stream, false);
    }
    stdout_.Discard();
    stderr_.Discard();
    return true;
  }
  for (const Rank& rank : ranks_) {
    if (rank.out.fd >= 0 || rank.err.fd >= 0) return false;
  }
  return !stdout_.HasPending() && !stderr_.HasPending();
}

void Job::Say(absl::string_view line) {
  std::string* queue = stderr_.queue();
  queue->append(line.data(), line.size());
  queue->push_back('\n');
}

}  // namespace

JobOutcome RunJob(const JobSpec& spec, SignalChannel& signals) {
  Job job(spec, signals);
  return job.Run();
}

}  // namespace weft::launcher
