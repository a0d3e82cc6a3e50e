#include "comm_state.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/arena_rounds.h"
#include "log.h"
#ifdef WEFT_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#include "weft/topology/host.h"

namespace weft::internal {
namespace {

constexpr absl::Duration kDefaultTimeout = absl::Seconds(300);

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? std::string(value) : fallback;
}

// The model every rank prices with: WEFT_TUNING_FILE as rank 0 reads it, handed to the others
// through the store so that all ranks hold the same text, else the built-in defaults. Rank 0's
// verdict travels too: a file it cannot read or parse fails creation on every rank, naming it.
// So does its CommOptions::shared_buffers, part of the layout the picks depend on, which every
// rank must share.
absl::StatusOr<CostModel> SharedModel(Store& store, int rank, bool shared_buffers,
                                      const Deadline& deadline) {
  constexpr char kKey[] = "tuning_file";
  // shared_buffers ('0' or '1'), then "" (no file), "+PATH\nTEXT" or "!ERROR".
  std::string record(1, shared_buffers ? '1' : '0');
  if (rank == 0) {
    if (const std::string path = EnvOr("WEFT_TUNING_FILE", ""); !path.empty()) {
      std::ifstream in(path);
      std::stringstream text;
      if (in) text << in.rdbuf();
      absl::StrAppend(&record,
                      in ? absl::StrCat("+", path, "\n", text.str())
                         : absl::StrCat("!WEFT_TUNING_FILE ", path, ": ", std::strerror(errno)));
    }
    if (absl::Status s = store.Set(kKey, record); !s.ok()) return s;
  } else {
    absl::StatusOr<std::string> got = store.Get(kKey, deadline);
    if (!got.ok()) return got.status();
    if (got->empty() || (*got)[0] != record[0]) {
      return absl::FailedPreconditionError(
          absl::StrCat("shared_buffers (WEFT_SHARED_BUFFERS) is ", shared_buffers ? 1 : 0,
                       " on this rank but not on rank 0: every rank must say the same"));
    }
    record = *std::move(got);
  }
  CostModel model;
  if (record.size() == 1) return model;
  if (record[1] == '!') {
    return absl::NotFoundError(absl::StrCat(record.substr(2), " (read by rank 0)"));
  }
  const size_t cut = record.find('\n');
  const std::string path = record.substr(2, cut - 2);
  if (absl::Status s = model.Merge(absl::string_view(record).substr(cut + 1), path); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("WEFT_TUNING_FILE ", s.message()));
  }
  return model;
}

}  // namespace

absl::StatusOr<CommConfig> ResolveConfig(const CommOptions& options) {
  CommConfig config;
  config.timeout = options.timeout;
  if (config.timeout <= absl::ZeroDuration()) {
    config.timeout = kDefaultTimeout;
    const std::string text = EnvOr("WEFT_TIMEOUT", "");
    if (!text.empty()) {
      double seconds = 0;
      if (!absl::SimpleAtod(text, &seconds) || seconds <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("WEFT_TIMEOUT='", text, "' is not a positive number of seconds"));
      }
      config.timeout = absl::Seconds(seconds);
    }
  }
  config.algorithm_spec = options.algorithm.empty() ? EnvOr("WEFT_ALGO", "") : options.algorithm;
  config.transport =
      options.transport.empty() ? EnvOr("WEFT_TRANSPORT", "auto") : options.transport;
  if (config.transport != "auto" && config.transport != "tcp" && config.transport != "shm" &&
      config.transport != "ucx") {
    return absl::InvalidArgumentError(
        absl::StrCat("WEFT_TRANSPORT='", config.transport, "' is not one of auto, tcp, shm, ucx"));
  }
  if (options.shared_buffers.has_value()) {
    config.shared_buffers = *options.shared_buffers;
  } else if (const std::string text = EnvOr("WEFT_SHARED_BUFFERS", "0"); text == "1") {
    config.shared_buffers = true;
  } else if (text != "0") {
    return absl::InvalidArgumentError(
        absl::StrCat("WEFT_SHARED_BUFFERS='", text, "' is not 1 or 0"));
  }
#ifndef WEFT_HAVE_UCX
  if (config.transport == "ucx") {
    return absl::InvalidArgumentError(
        "WEFT_TRANSPORT=ucx but this build of Weft has no UCX transport (install libucx-dev and "
        "rebuild; `weft-info` lists the transports a build has)");
  }
#endif
  return config;
}

CommState::CommState(Rendezvous rendezvous, int rank, int size, CommConfig config,
                     AlgorithmSelector selector)
    : rendezvous_(std::move(rendezvous)),
      rank_(rank),
      size_(size),
      config_(std::move(config)),
      selector_(std::move(selector)) {}

CommState::~CommState() {
  // The engine runs operations on peers_: stop it before the links go away.
  if (engine_ != nullptr) engine_->Shutdown();
  engine_.reset();
  peers_.reset();
}

absl::StatusOr<std::shared_ptr<CommState>> CommState::Create(Rendezvous rendezvous, int rank,
                                                             int size, CommConfig config) {
  absl::StatusOr<AlgorithmSelector> selector = AlgorithmSelector::Create(config.algorithm_spec);
  if (!selector.ok()) return selector.status();
  const Deadline deadline = Deadline::In(config.timeout);
  const std::string me = absl::StrCat("rank ", rank, " of ", size);
  auto fail = [&](const absl::Status& s, absl::string_view during) {
    return absl::Status(s.code(),
                        absl::StrCat(me, ": creating communicator: ", during, ": ", s.message()));
  };

  Store& store = *rendezvous.store;
  // Every rank's host identity, the kernel it runs on and the CPUs it may use, in one exchange.
  cpu_set_t cpu_set;
  const int my_cpus =
      sched_getaffinity(0, sizeof(cpu_set), &cpu_set) == 0 ? CPU_COUNT(&cpu_set) : 0;
  absl::StatusOr<std::vector<std::string>> records =
      StoreAllGather(store, "host", rank, size,
                     absl::StrCat(HostIdentity(), "\n", KernelIdentity(), "\n", my_cpus), deadline);
  if (!records.ok()) return fail(records.status(), "exchanging host identities");
  std::vector<std::string> hosts(size), kernels(size);
  std::vector<int> cpus(size, 0);
  for (int r = 0; r < size; ++r) {
    absl::string_view record = (*records)[r];
    const size_t cpus_at = record.rfind('\n');
    const size_t kernel_at =
        cpus_at == absl::string_view::npos ? cpus_at : record.rfind('\n', cpus_at - 1);
    if (kernel_at == absl::string_view::npos ||
        !absl::SimpleAtoi(record.substr(cpus_at + 1), &cpus[r])) {
      return fail(absl::DataLossError(absl::StrCat("malformed host record from rank ", r)),
                  "exchanging host identities");
    }
    hosts[r] = std::string(record.substr(0, kernel_at));
    kernels[r] = std::string(record.substr(kernel_at + 1, cpus_at - kernel_at - 1));
  }

  std::vector<int> local_ranks, shm_peers, tcp_peers;
  for (int r = 0; r < size; ++r) {
    const bool local = hosts[r] == hosts[rank];
    if (local) local_ranks.push_back(r);
    if (r == rank) continue;
    if (local && config.transport != "tcp") {
      shm_peers.push_back(r);
    } else if (config.transport == "shm") {
      return fail(
          absl::InvalidArgumentError(absl::StrCat("WEFT_TRANSPORT=shm but rank ", r, " is on host ",
                                                  hosts[r], " and this rank on ", hosts[rank])),
          "choosing transports");
    } else {
      tcp_peers.push_back(r);
    }
  }

  const std::string unique_name = absl::StrCat(rendezvous.job_name, "-", rendezvous.prefix);
  std::vector<std::unique_ptr<Link>> links(size);
  struct Plan {
    std::unique_ptr<Transport> transport;
    const std::vector<int>* peers;
  };
  // Peers on other hosts: TCP, or UCX when asked for (WEFT_TRANSPORT=ucx).
#ifdef WEFT_HAVE_UCX
  std::unique_ptr<Transport> network =
      config.transport == "ucx" ? MakeUcxTransport() : MakeTcpTransport();
#else
  std::unique_ptr<Transport> network = MakeTcpTransport();
#endif
  Plan plans[] = {{MakeShmTransport(), &shm_peers}, {std::move(network), &tcp_peers}};
  for (Plan& plan : plans) {
    PrefixStore transport_store(rendezvous.store, std::string(plan.transport->name()));
    ConnectContext context;
    context.store = &transport_store;
    context.rank = rank;
    context.size = size;
    context.host_ids = hosts;
    context.token = rendezvous.token;
    context.unique_name = unique_name;
    context.deadline = deadline;
    absl::StatusOr<std::vector<std::unique_ptr<Link>>> connected =
        plan.transport->Connect(context, *plan.peers);
    if (!connected.ok()) {
      return fail(connected.status(), absl::StrCat("connecting ", plan.transport->name()));
    }
    for (size_t i = 0; i < plan.peers->size(); ++i) {
      links[(*plan.peers)[i]] = std::move((*connected)[i]);
    }
  }

  // The communicator's ranks share cores when some rank's host, or its kernel (network
  // namespaces and containers on one kernel take turns on the same cores), runs more of them
  // than that rank may use. Every rank computes this from the same records, so all agree (the
  // tuner prices with it).
  for (int r = 0; r < size; ++r) {
    const auto same_host = std::count(hosts.begin(), hosts.end(), hosts[r]);
    const auto same_kernel =
        kernels[r].empty() ? 0 : std::count(kernels.begin(), kernels.end(), kernels[r]);
    if (cpus[r] > 0 && std::max(same_host, same_kernel) > cpus[r]) {
      rendezvous.oversubscribed = true;
    }
  }
  const bool oversubscribed = rendezvous.oversubscribed;

  std::unique_ptr<ShmArena> arena;
  if (config.transport != "tcp" && size > 1 && static_cast<int>(local_ranks.size()) == size) {
    PrefixStore arena_store(rendezvous.store, "arena");
    absl::StatusOr<std::unique_ptr<ShmArena>> created =
        ShmArena::Create(arena_store, unique_name, rank, local_ranks, ArenaRounds::AreaBytes(),
                         oversubscribed, deadline);
    if (!created.ok()) return fail(created.status(), "mapping the shared-memory arena");
    arena = *std::move(created);
  }
  if (DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo, absl::StrCat(me, ": communicator ", unique_name, " up: ",
                                             shm_peers.size(), " shm peers, ", tcp_peers.size(),
                                             " tcp peers, arena ", arena != nullptr ? "yes" : "no",
                                             oversubscribed ? ", ranks share cores" : ""));
  }

  std::shared_ptr<CommState> state(
      new CommState(std::move(rendezvous), rank, size, std::move(config), *std::move(selector)));
  state->peers_ =
      std::make_unique<Peers>(rank, size, std::move(links), std::move(arena), oversubscribed);
  state->peers_->SetNodes(NodeLayout(hosts, rank));
  // Every rank sees the same layout and arena, so all fail alike, and soon.
  if (absl::Status s = state->selector_.CheckForced(*state->peers_, state->config_.transport);
      !s.ok()) {
    return fail(s, "choosing algorithms");
  }
  absl::StatusOr<CostModel> model =
      SharedModel(*state->rendezvous_.store, rank, state->config_.shared_buffers, deadline);
  if (!model.ok()) return fail(model.status(), "agreeing on the tuner's model");
  if (rank == 0 && DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo, absl::StrCat(me, ": tuner model: ", model->source()));
  }
  state->selector_.SetTuner(*std::move(model),
                            CommLayout::Of(*state->peers_, state->config_.shared_buffers), rank);
  state->engine_ =
      Engine::Start(absl::StrCat("rank ", rank), state->config_.timeout, oversubscribed);
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->sent_to.assign(size, 0);
    state->received_from.assign(size, 0);
  }
  return state;
}

}  // namespace weft::internal
