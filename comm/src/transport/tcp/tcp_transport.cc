// The TCP transport: listens, publishes where it listens, and builds a TcpLink per peer.
//
// Connect() steps: pick interfaces (WEFT_SOCKET_IFNAME), open a listener on an ephemeral port,
// publish its addresses and this rank's host under "tcp/addr/<rank>", read the records of the
// higher peers, and let ConnectMesh open and authenticate the streams. The lower rank of each
// pair decides the pair's stream count (its WEFT_SOCKET_NSTREAMS); the listener is closed once
// every stream is up.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "log.h"
#include "transport/link.h"
#include "transport/tcp/interfaces.h"
#include "transport/tcp/listener_record.h"
#include "transport/tcp/mesh_connector.h"
#include "transport/tcp/socket.h"
#include "transport/tcp/tcp_link.h"
#include "weft/topology/host.h"

namespace weft {
namespace {

constexpr int kDefaultStreams = 2;

std::string RecordKey(int rank) { return absl::StrCat("tcp/addr/", rank); }

absl::Status Prefixed(int rank, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("rank ", rank, ": ", status.message()));
}

class TcpTransport final : public Transport {
 public:
  TcpTransport(std::string ifname, std::optional<std::string> nstreams)
      : ifname_(std::move(ifname)), nstreams_(std::move(nstreams)) {}

  absl::string_view name() const override { return "tcp"; }

  absl::StatusOr<std::vector<std::unique_ptr<Link>>> Connect(
      const ConnectContext& context, const std::vector<int>& peers) override;

 private:
  absl::StatusOr<int> StreamCount() const;
  absl::Status CheckContext(const ConnectContext& context, const std::vector<int>& peers) const;

  std::string ifname_;
  std::optional<std::string> nstreams_;
};

absl::StatusOr<int> TcpTransport::StreamCount() const {
  if (!nstreams_.has_value()) return kDefaultStreams;
  int count = 0;
  if (!absl::SimpleAtoi(*nstreams_, &count) || count < 1 || count > tcp::kMaxStreams) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WEFT_SOCKET_NSTREAMS='", *nstreams_, "' is not a number from 1 to ", tcp::kMaxStreams));
  }
  return count;
}

absl::Status TcpTransport::CheckContext(const ConnectContext& context,
                                        const std::vector<int>& peers) const {
  if (context.store == nullptr) return absl::InvalidArgumentError("tcp transport: no store");
  if (context.rank < 0 || context.rank >= context.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tcp transport: rank ", context.rank, " is outside a communicator of size ", context.size));
  }
  std::set<int> seen;
  for (int peer : peers) {
    if (peer < 0 || peer >= context.size || peer == context.rank || !seen.insert(peer).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", context.rank, ": tcp transport: bad peer list [",
                       absl::StrJoin(peers, ","), "] for a communicator of size ", context.size,
                       " (each peer must be another rank, listed once)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<Link>>> TcpTransport::Connect(
    const ConnectContext& context, const std::vector<int>& peers) {
  std::vector<std::unique_ptr<Link>> links;
  if (peers.empty()) return links;
  if (absl::Status s = CheckContext(context, peers); !s.ok()) return s;
  const int rank = context.rank;
  absl::StatusOr<int> nstreams = StreamCount();
  if (!nstreams.ok()) return Prefixed(rank, nstreams.status());

  absl::StatusOr<std::vector<tcp::InterfaceAddress>> all = tcp::EnumerateInterfaces();
  if (!all.ok()) return Prefixed(rank, all.status());
  absl::StatusOr<std::vector<tcp::InterfaceAddress>> chosen = tcp::SelectInterfaces(*all, ifname_);
  if (!chosen.ok()) return Prefixed(rank, chosen.status());
  int port = 0;
  absl::StatusOr<tcp::ScopedFd> listener = tcp::OpenListener(&port);
  if (!listener.ok()) {
    return Prefixed(rank, absl::Status(listener.status().code(),
                                       absl::StrCat("tcp transport: opening the listener: ",
                                                    listener.status().message())));
  }

  tcp::MeshPlan plan;
  plan.rank = rank;
  plan.peers = peers;
  plan.nstreams = *nstreams;
  plan.token = context.token;
  plan.unique_name = context.unique_name;
  plan.host_id =
      static_cast<size_t>(rank) < context.host_ids.size() ? context.host_ids[rank] : HostIdentity();
  plan.loopback_chosen = !ifname_.empty() && std::any_of(chosen->begin(), chosen->end(),
                                                         [](const tcp::InterfaceAddress& a) {
                                                           return a.address.IsLoopback();
                                                         });
  tcp::ListenerRecord mine{plan.host_id, *chosen};
  for (tcp::InterfaceAddress& a : mine.addresses) a.address.set_port(port);
  if (absl::Status s = context.store->Set(RecordKey(rank), tcp::FormatListenerRecord(mine));
      !s.ok()) {
    return Prefixed(rank,
                    absl::Status(s.code(), absl::StrCat("tcp transport: publishing the listener "
                                                        "address: ",
                                                        s.message())));
  }
  for (int peer : peers) {
    if (peer < rank) continue;
    absl::StatusOr<std::string> text = context.store->Get(RecordKey(peer), context.deadline);
    if (!text.ok()) {
      return Prefixed(rank, absl::Status(text.status().code(),
                                         absl::StrCat("tcp transport: waiting for rank ", peer,
                                                      " to publish its listener address: ",
                                                      text.status().message())));
    }
    absl::StatusOr<tcp::ListenerRecord> record = tcp::ParseListenerRecord(*text);
    if (!record.ok()) {
      return Prefixed(rank, absl::Status(record.status().code(),
                                         absl::StrCat("tcp transport: the record of rank ", peer,
                                                      ": ", record.status().message())));
    }
    plan.listeners.emplace(peer, *std::move(record));
  }

  absl::StatusOr<std::vector<tcp::PeerStreams>> mesh =
      tcp::ConnectMesh(plan, listener->get(), context.deadline);
  if (!mesh.ok()) return mesh.status();

  std::vector<std::string> routes;
  for (tcp::PeerStreams& entry : *mesh) {
    routes.push_back(entry.peer > rank
                         ? absl::StrCat("to rank ", entry.peer, " via ", entry.interface, " ",
                                        entry.address, " (", entry.streams.size(), " streams)")
                         : absl::StrCat("from rank ", entry.peer, " at ", entry.address, " (",
                                        entry.streams.size(), " streams)"));
    links.push_back(std::make_unique<tcp::TcpLink>(rank, entry.peer, std::move(entry.address),
                                                   std::move(entry.streams)));
  }
  if (DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo, absl::StrCat("rank ", rank, ": tcp transport: listening on port ",
                                             port, " at ", tcp::DescribeInterfaces(*chosen),
                                             "; connected ", absl::StrJoin(routes, ", ")));
  }
  return links;
}

}  // namespace

std::unique_ptr<Transport> MakeTcpTransport() {
  const char* ifname = std::getenv("WEFT_SOCKET_IFNAME");
  const char* nstreams = std::getenv("WEFT_SOCKET_NSTREAMS");
  return std::make_unique<TcpTransport>(
      ifname == nullptr ? "" : ifname,
      nstreams == nullptr ? std::nullopt : std::optional<std::string>(nstreams));
}

}  // namespace weft
