// weftrun: starts the ranks of a Weft job on this node. See kUsage (options.cc) for the command
// line and job.h for how the ranks are supervised.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/unique_id.h"
#include "job.h"
#include "node_barrier.h"
#include "node_binding.h"
#include "options.h"
#include "signal_channel.h"
#include "spawn.h"

extern char** environ;

namespace weft::launcher {
namespace {

constexpr int kExitUsage = 2;

// With one of fds 0-2 closed, the next pipe would take its number and a rank's stdout could end
// up on the launcher's stderr; /dev/null fills any such gap.
void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    const int filler = open("/dev/null", O_RDWR);
    if (filler >= 0 && filler != fd) close(filler);
  }
}

int Fail(int code, const std::string& message) {
  fprintf(stderr, "weftrun: %s\n", message.c_str());
  return code;
}

int Main(int argc, char** argv) {
  EnsureStandardFds();
  absl::StatusOr<LaunchOptions> options =
      ParseLaunchOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    return Fail(kExitUsage, absl::StrCat(options.status().message(), "\nTry 'weftrun --help'."));
  }
  if (options->help) {
    fputs(kUsage, stdout);
    return 0;
  }

  const bool multi_node = options->nnodes > 1;
  const char* token_env = getenv("WEFT_TOKEN");
  std::string token = token_env != nullptr ? token_env : "";
  if (token.empty()) {
    if (multi_node) {
      return Fail(kExitUsage,
                  "a multi-node job needs WEFT_TOKEN set to the same secret on every node, e.g.\n"
                  "  export WEFT_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')");
    }
    token = NewToken();
  }

  absl::StatusOr<std::string> program = ResolveProgram(options->command[0]);
  if (!program.ok()) return Fail(kExitCannotExecute, std::string(program.status().message()));

  // Before the store's thread exists, so that it too blocks the signals (signal_channel.h).
  SignalChannel signals;
  if (absl::Status s = signals.Open(); !s.ok()) {
    return Fail(kExitLauncherError, std::string(s.message()));
  }

  // Node 0 hosts the rendezvous store. A single-node job listens on the loopback address with
  // the port the kernel picks, which it hands to the ranks: no port to choose, none to collide.
  std::unique_ptr<TcpStoreServer> store;
  int store_port = options->master_port;
  if (options->node_rank == 0) {
    const std::string listen_host = multi_node ? "0.0.0.0" : options->master_addr;
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start(listen_host, options->master_port, token);
    if (!started.ok()) {
      return Fail(kExitLauncherError,
                  absl::StrCat("cannot host the rendezvous store on ", listen_host, ":",
                               options->master_port, ": ", started.status().message(),
                               options->master_port != 0 ? " (is --master-port in use?)" : ""));
    }
    store = *std::move(started);
    store_port = store->port();
  }

  JobSpec spec;
  spec.program = *program;
  spec.argv = options->command;
  for (char** entry = environ; *entry != nullptr; ++entry) spec.environment.push_back(*entry);
  spec.node_rank = options->node_rank;
  spec.local_size = options->nproc_per_node;
  spec.first_rank = options->first_rank();
  spec.world_size = options->world_size();
  absl::StatusOr<NodeBinding> binding = PlanNodeBinding(spec.local_size, spec.first_rank);
  if (!binding.ok()) return Fail(kExitUsage, std::string(binding.status().message()));
  spec.affinity = std::move(binding->affinity);
  // Asked-for binding is reported, so that a launcher's earlier binding or a missing device is
  // not mistaken for the placement the user wanted.
  for (const std::string& note : binding->notes) fprintf(stderr, "weftrun: %s\n", note.c_str());
  spec.store_addr = options->master_addr;
  spec.store_port = store_port;
  spec.token = token;
  spec.prefix_output = options->prefix_output;
  spec.timeout = options->timeout;
  const absl::Time job_start = absl::Now();
  JobOutcome outcome = RunJob(spec, signals);

  if (multi_node) {
    const bool succeeded = outcome.exit_code == 0 && outcome.signal == 0;
    const NodeBarrier barrier{options->node_rank == 0 ? "127.0.0.1" : options->master_addr,
                              store_port, token, options->node_rank, options->nnodes};
    const absl::Time until = options->timeout == absl::InfiniteDuration()
                                 ? absl::Now() + kNodeBarrierTimeout
                                 : job_start + options->timeout;
    absl::StatusOr<int> signo =
        FinishNode(barrier, options->node_rank == 0 && succeeded, until, signals);
    if (!signo.ok()) {
      fprintf(stderr, "weftrun: %s\n", std::string(signo.status().message()).c_str());
    } else if (*signo != 0) {
      outcome = {128 + *signo, *signo};
    }
  }

  store.reset();
  if (outcome.signal != 0) signals.DieBy(outcome.signal);
  return outcome.exit_code;
}

}  // namespace
}  // namespace weft::launcher

int main(int argc, char** argv) { return weft::launcher::Main(argc, argv); }
