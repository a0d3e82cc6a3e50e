// How a Communicator comes to be: from the launch environment, from a unique id, or split from
// another. Each way finds its rendezvous store and key prefix, then builds the shared state and
// connects it to the other ranks' failures.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "bootstrap/environment.h"
#include "bootstrap/unique_id.h"
#include "comm_state.h"
#include "fault_watch.h"
#include "flight_recorder.h"
#include "weft/comm/communicator.h"
#include "weft/topology/host.h"

namespace weft {
namespace {

using internal::CommState;

// Communicators this process made from the launch environment, numbered in creation order: each
// spans the whole job, so every rank makes them in the same order and the numbers give them
// matching prefixes in the job's store. A communicator from a unique id has that id's store to
// itself, so communicators a rank made before (from other ids) cannot shift its prefix.
std::atomic<int> environment_communicators{0};
constexpr absl::string_view kUniqueIdPrefix = "u";

// Stores started by CreateUniqueId, waiting for this process's rank 0 to adopt them.
std::mutex hosted_mu;
std::map<std::string, std::unique_ptr<TcpStoreServer>>& HostedStores() {
  static auto* stores = new std::map<std::string, std::unique_ptr<TcpStoreServer>>();
  return *stores;
}

}  // namespace

// Friend-free construction of the handle: the constructor is private to keep CommState internal.
class CommunicatorFactory {
 public:
  static std::unique_ptr<Communicator> Wrap(std::shared_ptr<CommState> state) {
    return std::unique_ptr<Communicator>(new Communicator(std::move(state)));
  }
  static const CommState& State(const Communicator& comm) { return *comm.state_; }
};

const CommState& internal::StateOf(const Communicator& comm) {
  return CommunicatorFactory::State(comm);
}

namespace {

// Connects a new communicator to the other ranks' failures (fault_watch.h) and names its flight
// recorder's file.
absl::Status WatchFaults(CommState& state, const std::string& job_name) {
  const internal::Rendezvous& rendezvous = state.rendezvous();
  const Deadline deadline = Deadline::In(state.config().timeout);
  Engine& engine = state.engine();
  RecorderIdentity identity;
  identity.rank = state.rank();
  identity.size = state.size();
  identity.pid = getpid();
  identity.host = HostName();
  identity.comm = rendezvous.prefix;
  identity.path = FlightRecorder::PathFor(job_name, rendezvous.prefix, state.rank());
  engine.recorder().SetIdentity(std::move(identity));

  // The watch parks long Gets: on a connection of its own, so it never delays the store traffic
  // of this communicator or of the others sharing the job's connection.
  std::shared_ptr<Store> watch_store = rendezvous.store;
  if (const auto* tcp = dynamic_cast<const TcpStoreClient*>(rendezvous.root.get())) {
    absl::StatusOr<std::unique_ptr<TcpStoreClient>> again = tcp->ConnectAgain(deadline);
    if (!again.ok()) {
      return absl::Status(again.status().code(),
                          absl::StrCat("rank ", state.rank(),
                                       ": creating communicator: a second store connection for "
                                       "the fault watch: ",
                                       again.status().message()));
    }
    watch_store =
        std::make_shared<PrefixStore>(std::shared_ptr<Store>(*std::move(again)), rendezvous.prefix);
  }
  FaultWatch::Callbacks callbacks;
  callbacks.on_fault = [&engine](const std::string& report) { engine.OnPeerFault(report); };
  callbacks.on_dump_signal = [&engine] { (void)engine.DumpRecorder("SIGUSR1"); };
  absl::StatusOr<std::unique_ptr<FaultWatch>> watch =
      FaultWatch::Start(rendezvous.store, std::move(watch_store), state.rank(), state.size(),
                        deadline, std::move(callbacks));
  if (!watch.ok()) {
    return absl::Status(watch.status().code(),
                        absl::StrCat("rank ", state.rank(),
                                     ": creating communicator: exchanging process identities: ",
                                     watch.status().message()));
  }
  std::vector<std::string> names;
  for (int r = 0; r < state.size(); ++r) names.push_back((*watch)->Describe(r));
  state.peers().SetProcessNames(std::move(names));
  engine.Attach(*std::move(watch));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> Build(internal::Rendezvous rendezvous, int rank,
                                                    int size, const CommOptions& options) {
  absl::StatusOr<internal::CommConfig> config = internal::ResolveConfig(options);
  if (!config.ok()) return config.status();
  rendezvous.store = std::make_shared<PrefixStore>(rendezvous.root, rendezvous.prefix);
  const std::string job_name = rendezvous.job_name;
  absl::StatusOr<std::shared_ptr<CommState>> state =
      CommState::Create(std::move(rendezvous), rank, size, *std::move(config));
  if (!state.ok()) return state.status();
  if (absl::Status s = WatchFaults(**state, job_name); !s.ok()) return s;
  return CommunicatorFactory::Wrap(*std::move(state));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::CreateFromEnvironment(
    const CommOptions& options) {
  absl::StatusOr<internal::CommConfig> config = internal::ResolveConfig(options);
  if (!config.ok()) return config.status();
  absl::StatusOr<LaunchEnvironment> env = ReadLaunchEnvironment();
  if (!env.ok()) return env.status();
  if (env->store_port <= 0 || env->store_host.empty() || env->token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", env->rank, ": ", env->source,
        " started this process but named no rendezvous "
        "store: set WEFT_ADDR and WEFT_PORT (or MASTER_ADDR and MASTER_PORT) and WEFT_TOKEN, "
        "the same on every rank"));
  }
  internal::Rendezvous rendezvous;
  rendezvous.token = env->token;
  // weftrun hosts the store itself; other launchers leave it to rank 0.
  if (env->source != "weftrun" && env->rank == 0) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
        TcpStoreServer::Start("", env->store_port, env->token);
    if (!server.ok()) {
      return absl::Status(
          server.status().code(),
          absl::StrCat("rank 0: starting the rendezvous store on port ", env->store_port, " (from ",
                       env->source, "'s variables): ", server.status().message()));
    }
    rendezvous.server = *std::move(server);
  }
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      env->store_host, env->store_port, env->token, Deadline::In(config->timeout));
  if (!client.ok()) {
    return absl::Status(
        client.status().code(),
        absl::StrCat("rank ", env->rank, ": reaching the rendezvous store at ", env->store_host,
                     ":", env->store_port, ": ", client.status().message()));
  }
  rendezvous.root = *std::move(client);
  rendezvous.job_name = absl::StrCat("weft-", env->token.substr(0, 12));
  rendezvous.prefix = absl::StrCat("c", environment_communicators++);
  return Build(std::move(rendezvous), env->rank, env->size, options);
}

absl::StatusOr<std::string> Communicator::CreateUniqueId(const std::string& host) {
  const std::string token = NewToken();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start("", 0, token);
  if (!server.ok()) return server.status();
  ParsedUniqueId parsed;
  parsed.host = host.empty() ? HostName() : host;
  parsed.port = (*server)->port();
  parsed.token = token;
  std::string id = FormatUniqueId(parsed);
  std::lock_guard<std::mutex> lock(hosted_mu);
  HostedStores()[id] = *std::move(server);
  return id;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const std::string& unique_id,
                                                                   int rank, int size,
                                                                   const CommOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator::Create: rank ", rank, " is not in [0, ", size, ")"));
  }
  absl::StatusOr<internal::CommConfig> config = internal::ResolveConfig(options);
  if (!config.ok()) return config.status();
  absl::StatusOr<ParsedUniqueId> parsed = ParseUniqueId(unique_id);
  if (!parsed.ok()) return parsed.status();
  internal::Rendezvous rendezvous;
  rendezvous.token = parsed->token;
  {
    std::lock_guard<std::mutex> lock(hosted_mu);
    auto it = HostedStores().find(unique_id);
    if (it != HostedStores().end()) {
      rendezvous.server = std::move(it->second);
      HostedStores().erase(it);
    }
  }
  // The id's host names the creator's machine; in the creating process loopback always works.
  const std::string host = rendezvous.server != nullptr ? "127.0.0.1" : parsed->host;
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect(host, parsed->port, parsed->token, Deadline::In(config->timeout));
  if (!client.ok()) return client.status();
  rendezvous.root = *std::move(client);
  rendezvous.job_name = absl::StrCat("weft-", parsed->token.substr(0, 12));
  rendezvous.prefix = std::string(kUniqueIdPrefix);
  return Build(std::move(rendezvous), rank, size, options);
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key) {
  CommOptions options;
  options.timeout = state_->config().timeout;
  options.algorithm = state_->config().algorithm_spec;
  options.transport = state_->config().transport;
  options.shared_buffers = state_->config().shared_buffers;
  return Split(color, key, options);
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key,
                                                                  const CommOptions& options) {
  const internal::Rendezvous& parent = state_->rendezvous();
  uint64_t split;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    split = state_->next_split++;
  }
  const Deadline deadline = Deadline::In(state_->config().timeout);
  const std::string round = absl::StrCat("split", split);
  absl::StatusOr<std::vector<std::string>> choices =
      StoreAllGather(*parent.store, round, rank(), size(), absl::StrCat(color, " ", key), deadline);
  if (!choices.ok()) {
    return absl::Status(choices.status().code(), absl::StrCat("rank ", rank(), ": split #", split,
                                                              ": ", choices.status().message()));
  }
  if (color < 0) return std::unique_ptr<Communicator>();
  // Members: same color, ordered by (key, parent rank).
  std::vector<std::pair<int, int>> members;
  for (int r = 0; r < size(); ++r) {
    int their_color = 0, their_key = 0;
    if (std::sscanf((*choices)[r].c_str(), "%d %d", &their_color, &their_key) != 2) {
      return absl::DataLossError(
          absl::StrCat("rank ", rank(), ": split #", split, ": malformed entry from rank ", r));
    }
    if (their_color == color) members.emplace_back(their_key, r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank()) new_rank = static_cast<int>(i);
  }
  internal::Rendezvous child;
  child.root = parent.root;
  child.prefix = absl::StrCat(parent.prefix, "/", round, "c", color);
  child.token = parent.token;
  child.job_name = parent.job_name;
  child.oversubscribed = parent.oversubscribed;
  return Build(std::move(child), new_rank, static_cast<int>(members.size()), options);
}

}  // namespace weft
