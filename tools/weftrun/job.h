// RunJob: starts this node's ranks and supervises them until the last one has ended and its
// output has been relayed.
//
// One thread runs one poll() loop over the signalfd (ranks ending, signals to pass on), the
// ranks' pipes (output to relay) and the launcher's own stdout and stderr (when output is
// queued for them). The policy it carries out:
// - A rank that exits non-zero or is killed by a signal fails the job: one line on stderr says
//   which rank and how, the other ranks get SIGTERM and, kStopGrace later, SIGKILL, and the job's
//   exit status is the failed rank's (128+N for signal N).
// - --timeout: the same stop, naming the ranks still running; exit status 124.
// - SIGINT, SIGTERM, SIGHUP: passed on to every rank's process group; a second one sends
//   SIGKILL. Once the ranks have ended, the launcher dies by that signal itself.
// - A program that cannot be executed: exit status 127, and ranks already started are killed.
// - When a rank ends, whatever is left of its process group is killed: nothing outlives its rank.
// Waiting for the ranks is the one wait without a deadline, as a launcher's must be; --timeout
// bounds it.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "signal_channel.h"

namespace weft::launcher {

struct JobSpec {
  std::string program;                   // as resolved by ResolveProgram()
  std::vector<std::string> argv;         // argv[0] as the user wrote it
  std::vector<std::string> environment;  // the launcher's; the WEFT_* the job sets replace these
  int node_rank = 0;
  int local_size = 1;  // ranks on this node
  int first_rank = 0;  // global rank of this node's local rank 0
  int world_size = 1;
  // Per local rank: the CPUs to bind it to (WEFT_BIND), or nullopt to leave its affinity alone.
  std::vector<std::optional<cpu_set_t>> affinity;
  std::string store_addr;  // WEFT_ADDR and WEFT_PORT: where the ranks find the rendezvous store
  int store_port = 0;
  std::string token;  // WEFT_TOKEN
  bool prefix_output = true;
  absl::Duration timeout = absl::InfiniteDuration();
};

inline constexpr absl::Duration kStopGrace = absl::Seconds(3);

// The launcher's own exit statuses; a failed rank's status is passed through instead.
inline constexpr int kExitLauncherError = 1;
inline constexpr int kExitTimedOut = 124;
inline constexpr int kExitCannotExecute = 127;

struct JobOutcome {
  int exit_code = 0;
  int signal = 0;  // non-zero: the launcher was told to stop by this signal and should die by it
};

// `signals` must be open. Call from the main thread (see SpawnRank).
JobOutcome RunJob(const JobSpec& spec, SignalChannel& signals);

}  // namespace weft::launcher
