// ConnectMesh: opens the TCP streams between this rank and each of its peers.
//
// The lower rank of every pair connects and the higher one accepts. One poll() loop drives all of
// it at once (outgoing attempts to every higher peer, handshakes of every incoming connection),
// so no rank waits for another to finish its own connects first, and a stray or hostile
// connection to the listener (garbage, a wrong token, silence) is dropped without disturbing the
// real ones.
//
// A connector tries the peer's published addresses in order (skipping loopback addresses of
// another host), each with a short timeout, and keeps the first one whose listener accepts the
// handshake; the remaining streams to that peer then use the same address. When no address works,
// the error lists every address tried and why it failed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deadline.h"
#include "transport/tcp/listener_record.h"
#include "transport/tcp/socket.h"

namespace weft::tcp {

// The most streams one link may have (WEFT_SOCKET_NSTREAMS).
inline constexpr int kMaxStreams = 16;

struct MeshPlan {
  int rank = 0;
  std::vector<int> peers;
  int nstreams = 1;  // streams this rank opens to each higher peer; lower peers choose their own
  std::string token;
  std::string unique_name;
  std::string host_id;  // this rank's host identity
  // Loopback addresses of other hosts are useless unless the user picked them on purpose
  // (WEFT_SOCKET_IFNAME=lo with WEFT_HOSTNAME: several pretend hosts on one machine).
  bool loopback_chosen = false;
  std::map<int, ListenerRecord> listeners;  // of every peer above this rank
};

// The established streams to one peer, in stream order.
struct PeerStreams {
  int peer = 0;
  std::vector<ScopedFd> streams;
  std::string address;    // "ip:port" of the peer's end of stream 0
  std::string interface;  // the interface used to reach a higher peer; "" for a lower one
};

// Returns one entry per plan.peers entry, in that order. `listen_fd` is this rank's listener
// (non-blocking), whose addresses the lower peers have read from the store.
absl::StatusOr<std::vector<PeerStreams>> ConnectMesh(const MeshPlan& plan, int listen_fd,
                                                     const Deadline& deadline);

}  // namespace weft::tcp
