#include "options.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace weft::launcher {

const char kUsage[] = R"(Usage: weftrun -n N [options] [--] PROGRAM [ARGS...]

Starts N ranks of PROGRAM on this host, one process each, hosts the job's rendezvous store,
and relays the ranks' output with every line tagged by rank. If a rank fails, the others are
stopped.

Options:
  -n, --nproc-per-node N   ranks to start on this node (required); a list N0,N1,... gives
                           every node's count (uneven nodes: -n 3,1 with --nnodes 2), the
                           same list on every node
      --nnodes K           nodes in the job (default 1)
      --node-rank R        this node's index, 0..K-1 (default 0)
      --master-addr HOST   node 0's address, where the rendezvous store listens
                           (default 127.0.0.1)
      --master-port PORT   the store's port; 0 picks a free one, single node only (default 0)
      --timeout DURATION   stop the job after this long: seconds, or 90s, 5m, 2h; exit 124
      --tag-output         lead every output line with "[rank] " (the default)
      --no-prefix          relay output lines untagged
  -h, --help               show this help and exit
torchrun's spellings --nproc_per_node, --node_rank, --master_addr and --master_port work too.

Each rank's environment is weftrun's plus WEFT_RANK, WEFT_SIZE, WEFT_LOCAL_RANK,
WEFT_LOCAL_SIZE, WEFT_NODE_RANK, WEFT_ADDR, WEFT_PORT and WEFT_TOKEN. The token is taken
from weftrun's WEFT_TOKEN when set; a multi-node job needs it set to the same secret on
every node. Ranks read stdin from /dev/null.

SIGINT, SIGTERM and SIGHUP are passed on to every rank; a second one kills them.

Exit status: 0 when every rank exits 0; else the first failing rank's status (128+N when
killed by signal N); 124 when --timeout expired; 127 when PROGRAM cannot be run; 2 for a
usage error.
)";

namespace {

// Long names are compared with '_' read as '-', which is how torchrun's spellings match.
std::string Canonical(absl::string_view name) {
  std::string canonical(name);
  if (canonical.rfind("--", 0) == 0) std::replace(canonical.begin(), canonical.end(), '_', '-');
  return canonical;
}

absl::StatusOr<int> ParseInt(absl::string_view option, absl::string_view value, int min, int max) {
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < min || parsed > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, " takes an integer from ", min, " to ", max, ", not '", value, "'"));
  }
  return parsed;
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view value) {
  absl::Duration timeout;
  double seconds = 0;
  if (absl::SimpleAtod(value, &seconds) && std::isfinite(seconds)) {
    timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, &timeout)) {
    timeout = absl::ZeroDuration();
  }
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout takes a positive duration (seconds, or e.g. 90s, 5m, 2h), not '", value, "'"));
  }
  return timeout;
}

}  // namespace

int LaunchOptions::world_size() const {
  if (node_sizes.empty()) return nnodes * nproc_per_node;
  return std::accumulate(node_sizes.begin(), node_sizes.end(), 0);
}

int LaunchOptions::first_rank() const {
  if (node_sizes.empty()) return node_rank * nproc_per_node;
  return std::accumulate(node_sizes.begin(), node_sizes.begin() + node_rank, 0);
}

absl::StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args) {
  LaunchOptions options;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    if (arg == "-np") {
      return absl::InvalidArgumentError("unknown option '-np' (mpirun's; weftrun's is -n N)");
    }

    // Split "--name=value" and "-nVALUE"; other options take their value from the next argument.
    std::string name;
    std::optional<std::string> attached;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      name = Canonical(arg.substr(0, eq));
      if (eq != std::string::npos) attached = arg.substr(eq + 1);
    } else {
      name = arg.substr(0, 2);
      if (arg.size() > 2) attached = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (attached.has_value()) return *attached;
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      return args[++i];
    };
    auto no_value = [&]() -> absl::Status {
      if (!attached.has_value()) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(name, " takes no value"));
    };

    absl::Status status;
    if (name == "-h" || name == "--help") {
      status = no_value();
      options.help = true;
    } else if (name == "--no-prefix" || name == "--tag-output") {
      status = no_value();
      options.prefix_output = name == "--tag-output";
    } else if ((name == "-n" || name == "--nproc-per-node") &&
               (attached.has_value()
                    ? attached->find(',') != std::string::npos
                    : i + 1 < args.size() && args[i + 1].find(',') != std::string::npos)) {
      absl::StatusOr<std::string> text = value();
      if (!text.ok()) return text.status();
      options.node_sizes.clear();
      for (absl::string_view item : absl::StrSplit(*text, ',')) {
        absl::StatusOr<int> parsed = ParseInt(name, item, 1, 1 << 20);
        if (!parsed.ok()) return parsed.status();
        options.node_sizes.push_back(*parsed);
      }
      options.nproc_per_node = options.node_sizes.front();
    } else if (name == "-n" || name == "--nproc-per-node" || name == "--nnodes" ||
               name == "--node-rank" || name == "--master-port") {
      absl::StatusOr<std::string> text = value();
      if (!text.ok()) return text.status();
      absl::StatusOr<int> parsed = name == "--master-port" ? ParseInt(name, *text, 0, 65535)
                                   : name == "--node-rank" ? ParseInt(name, *text, 0, 1 << 20)
                                                           : ParseInt(name, *text, 1, 1 << 20);
      if (!parsed.ok()) return parsed.status();
      if (name == "-n" || name == "--nproc-per-node") {
        options.nproc_per_node = *parsed;
        options.node_sizes.clear();
      }
      if (name == "--nnodes") options.nnodes = *parsed;
      if (name == "--node-rank") options.node_rank = *parsed;
      if (name == "--master-port") options.master_port = *parsed;
    } else if (name == "--master-addr") {
      absl::StatusOr<std::string> text = value();
      if (!text.ok()) return text.status();
      if (text->empty()) return absl::InvalidArgumentError("--master-addr needs a host name");
      options.master_addr = *text;
    } else if (name == "--timeout") {
      absl::StatusOr<std::string> text = value();
      if (!text.ok()) return text.status();
      absl::StatusOr<absl::Duration> timeout = ParseTimeout(*text);
      if (!timeout.ok()) return timeout.status();
      options.timeout = *timeout;
    } else {
      status = absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    if (!status.ok()) return status;
    if (options.help) return options;
  }
  options.command.assign(args.begin() + i, args.end());

  if (options.nproc_per_node == 0) {
    return absl::InvalidArgumentError("say how many ranks to start with -n N");
  }
  if (options.command.empty()) return absl::InvalidArgumentError("no program to run was given");
  if (options.node_rank >= options.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", options.node_rank, " is not below --nnodes ", options.nnodes));
  }
  if (!options.node_sizes.empty()) {
    if (static_cast<int>(options.node_sizes.size()) != options.nnodes) {
      return absl::InvalidArgumentError(absl::StrCat("-n lists ", options.node_sizes.size(),
                                                     " node sizes but --nnodes is ", options.nnodes,
                                                     ": give one count per node"));
    }
    options.nproc_per_node = options.node_sizes[options.node_rank];
  }
  int64_t total = int64_t{options.nnodes} * options.nproc_per_node;
  if (!options.node_sizes.empty()) {
    total = std::accumulate(options.node_sizes.begin(), options.node_sizes.end(), int64_t{0});
  }
  if (total > (1 << 20)) {
    return absl::InvalidArgumentError("--nnodes times --nproc-per-node exceeds 1048576 ranks");
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    return absl::InvalidArgumentError(
        "a multi-node job needs --master-port: every node must know where node 0's store listens");
  }
  return options;
}

}  // namespace weft::launcher
