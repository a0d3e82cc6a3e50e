// The shared-memory transport: links between ranks of one host through FIFOs in /dev/shm.
//
// Connect() runs in four steps, each rank waiting only for its own peers:
//   1. create and initialise the incoming ring from every peer (this rank is their receiver);
//   2. publish "ready" with this rank's pid, its pid namespace and the address of a probe word;
//   3. attach to the ring this rank sends on (the peer created it), check its header, and probe
//      whether process_vm_readv can read the peer's probe word (recorded in the incoming ring);
//   4. publish "attached" and wait for every peer's, then remove the ring names from /dev/shm.
// Every rank publishes its outcome at steps 2 and 4 even when it failed, so one rank's error
// (a full /dev/shm, a stale object, a foreign job) reaches its peers at once instead of at their
// deadline.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/link.h"
#include "transport/shm/process_watch.h"
#include "transport/shm/ring.h"
#include "transport/shm/shm_link.h"
#include "transport/shm/shm_segment.h"

namespace weft {
namespace {

// Mixed into the probe word so a stray read of unrelated memory cannot pass the probe.
constexpr uint64_t kProbeSalt = 0x9e3779b97f4a7c15ull;

// How long to wait for a peer's reason after its ring vanished.
constexpr absl::Duration kPeerFailureGrace = absl::Seconds(2);

uint64_t ProbeValue(uint64_t token_hash, int rank) {
  return (token_hash ^ kProbeSalt) + static_cast<uint64_t>(rank) * 0x100000001b3ull;
}

// What a rank publishes at step 2: "ok <pid> <probe address> <pid namespace or ->", or
// "error <message>".
struct Ready {
  pid_t pid = 0;
  uint64_t probe_address = 0;
  std::string pid_namespace;
};

std::string FormatReady(const Ready& ready) {
  return absl::StrFormat("ok %d %x %s", ready.pid, ready.probe_address,
                         ready.pid_namespace.empty() ? "-" : ready.pid_namespace);
}

absl::StatusOr<Ready> ParseReady(absl::string_view text, int peer) {
  if (absl::StartsWith(text, "error ")) {
    return absl::UnavailableError(
        absl::StrCat("rank ", peer, " failed to set up its end: ", text.substr(6)));
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  Ready ready;
  int pid = 0;
  if (parts.size() != 4 || parts[0] != "ok" || !absl::SimpleAtoi(parts[1], &pid) ||
      !absl::SimpleHexAtoi(parts[2], &ready.probe_address)) {
    return absl::DataLossError(absl::StrCat("rank ", peer,
                                            " published an unreadable shared-memory record '", text,
                                            "' (mismatched Weft builds?)"));
  }
  ready.pid = pid;
  if (parts[3] != "-") ready.pid_namespace = std::string(parts[3]);
  return ready;
}

std::string Outcome(const absl::Status& status) {
  return status.ok() ? "ok" : absl::StrCat("error ", status.message());
}

// A peer's published outcome of step 4 ("ok" or "error <why>") as a Status of this rank.
absl::Status AttachOutcome(absl::string_view text, int peer) {
  if (text == "ok") return absl::OkStatus();
  absl::ConsumePrefix(&text, "error ");
  return absl::UnavailableError(absl::StrCat("rank ", peer, " failed to attach: ", text));
}

// A peer removes its rings' names before every peer attached only when it gave up (e.g. it
// rejected this rank's ring); it reports why at step 4, which explains more than "No such file".
std::optional<absl::Status> PeerFailure(Store& store, absl::string_view key, int peer,
                                        const Deadline& deadline) {
  absl::StatusOr<std::string> text = store.Get(absl::StrCat(key, "/attached/", peer),
                                               deadline.Min(absl::Now() + kPeerFailureGrace));
  if (!text.ok() || *text == "ok") return std::nullopt;
  return AttachOutcome(*text, peer);
}

std::string RingName(const std::string& unique_name, int sender, int receiver) {
  return ShmObjectName(unique_name, absl::StrCat("ring.", sender, "-", receiver));
}

shm::RingHeader* HeaderOf(const ShmSegment& segment) {
  return std::launder(reinterpret_cast<shm::RingHeader*>(segment.data()));
}

void InitRing(const ShmSegment& segment, uint64_t token_hash, int sender, int receiver) {
  auto* header = new (segment.data()) shm::RingHeader();
  header->version = shm::kRingVersion;
  header->slot_count = shm::kSlotCount;
  header->slot_bytes = shm::kSlotBytes;
  header->segment_bytes = shm::kRingSegmentBytes;
  header->token_hash = token_hash;
  header->sender_rank = sender;
  header->receiver_rank = receiver;
  header->receiver_pid = getpid();
  header->magic.store(shm::kRingMagic, std::memory_order_release);
}

// Checks that the ring this rank is about to send on is what it expects: a Weft ring of this
// build's geometry, created by `peer`'s process for this job and this direction.
absl::Status ValidateRing(const ShmSegment& segment, uint64_t token_hash, int rank, int peer,
                          pid_t peer_pid) {
  const shm::RingHeader* header = HeaderOf(segment);
  if (segment.size() != shm::kRingSegmentBytes ||
      header->magic.load(std::memory_order_acquire) != shm::kRingMagic ||
      header->version != shm::kRingVersion || header->slot_count != shm::kSlotCount ||
      header->slot_bytes != shm::kSlotBytes || header->segment_bytes != shm::kRingSegmentBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("ring ", segment.name(), " is not a version-", shm::kRingVersion,
                     " Weft ring of ", shm::kSlotCount, " x ", shm::kSlotBytes,
                     "-byte slots (ranks built from different Weft versions?)"));
  }
  if (header->token_hash != token_hash) {
    return absl::PermissionDeniedError(absl::StrCat(
        "ring ", segment.name(), " belongs to a different job (its token does not match ours)"));
  }
  if (header->sender_rank != rank || header->receiver_rank != peer ||
      header->receiver_pid != peer_pid) {
    return absl::FailedPreconditionError(
        absl::StrCat("ring ", segment.name(), " connects rank ", header->sender_rank, " to rank ",
                     header->receiver_rank, " (pid ", header->receiver_pid, "), not rank ", rank,
                     " to rank ", peer, " (pid ", peer_pid, ")"));
  }
  return absl::OkStatus();
}

// Whether this process may read `peer`'s memory with process_vm_readv (same user and ptrace
// permission, a kernel built with cross-memory attach, no seccomp filter in the way).
bool ProbeRemoteRead(pid_t pid, uint64_t address, uint64_t expected) {
  uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void*>(address), sizeof(value)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(value) && value == expected;
}

absl::Status CheckPeers(const ConnectContext& context, const std::vector<int>& peers) {
  std::set<int> seen;
  for (int peer : peers) {
    if (peer < 0 || peer >= context.size || peer == context.rank || !seen.insert(peer).second) {
      return absl::InvalidArgumentError(absl::StrCat("peer list has invalid or repeated rank ",
                                                     peer, " (communicator size ", context.size,
                                                     ")"));
    }
    if (static_cast<int>(context.host_ids.size()) == context.size &&
        context.host_ids[peer] != context.host_ids[context.rank]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", peer, " is on host '", context.host_ids[peer], "', not on this host '",
          context.host_ids[context.rank], "': shared memory reaches only ranks of one host"));
    }
  }
  return absl::OkStatus();
}

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(bool allow_remote_read) : allow_remote_read_(allow_remote_read) {}

  absl::string_view name() const override { return "shm"; }

  absl::StatusOr<std::vector<std::unique_ptr<Link>>> Connect(
      const ConnectContext& context, const std::vector<int>& peers) override;

 private:
  const bool allow_remote_read_;
};

absl::StatusOr<std::vector<std::unique_ptr<Link>>> ShmTransport::Connect(
    const ConnectContext& context, const std::vector<int>& peers) {
  const int rank = context.rank;
  const auto fail = [rank](const absl::Status& status) {
    return absl::Status(
        status.code(),
        absl::StrCat("rank ", rank, ": shared-memory transport: ", status.message()));
  };
  if (absl::Status s = CheckPeers(context, peers); !s.ok()) return fail(s);
  std::vector<std::unique_ptr<Link>> links;
  if (peers.empty()) return links;

  const size_t n = peers.size();
  const uint64_t token_hash = Fnv1a(context.token);
  const std::string key = absl::StrFormat("shm/%016x", Fnv1a(context.unique_name));
  const std::string pid_namespace = PidNamespaceId();
  Store& store = *context.store;

  // Step 1: the incoming rings.
  absl::Status status;
  std::vector<ShmSegment> incoming(n);
  for (size_t i = 0; i < n && status.ok(); ++i) {
    absl::StatusOr<ShmSegment> segment =
        ShmSegment::Create(RingName(context.unique_name, peers[i], rank), shm::kRingSegmentBytes);
    if (!segment.ok()) {
      status = segment.status();
      break;
    }
    incoming[i] = *std::move(segment);
    InitRing(incoming[i], token_hash, peers[i], rank);
  }

  // Step 2: ready. The probe word must outlive every peer's probe, i.e. until step 4 is done.
  const auto probe = std::make_unique<uint64_t>(ProbeValue(token_hash, rank));
  const std::string ready =
      status.ok()
          ? FormatReady(Ready{getpid(), reinterpret_cast<uintptr_t>(probe.get()), pid_namespace})
          : Outcome(status);
  if (absl::Status s = store.Set(absl::StrCat(key, "/ready/", rank), ready); !s.ok()) {
    if (status.ok()) status = s;
  }

  // Step 3: the outgoing rings.
  std::vector<ShmSegment> outgoing(n);
  std::vector<ProcessWatch> watches(n);
  std::vector<bool> read_by_address(n, false);
  for (size_t i = 0; i < n && status.ok(); ++i) {
    const int peer = peers[i];
    absl::StatusOr<std::string> text =
        store.Get(absl::StrCat(key, "/ready/", peer), context.deadline);
    if (!text.ok()) {
      status = absl::Status(text.status().code(),
                            absl::StrCat("waiting for rank ", peer,
                                         " to create its rings: ", text.status().message()));
      break;
    }
    absl::StatusOr<Ready> peer_ready = ParseReady(*text, peer);
    if (!peer_ready.ok()) {
      status = peer_ready.status();
      break;
    }
    absl::StatusOr<ShmSegment> segment =
        ShmSegment::Open(RingName(context.unique_name, rank, peer));
    if (!segment.ok()) {
      status = PeerFailure(store, key, peer, context.deadline).value_or(segment.status());
      break;
    }
    status = ValidateRing(*segment, token_hash, rank, peer, peer_ready->pid);
    if (!status.ok()) break;
    outgoing[i] = *std::move(segment);

    // Pids mean something only inside one pid namespace (ranks in separate containers may share
    // /dev/shm but not pids): there the peer is neither watched nor read by address.
    if (!pid_namespace.empty() && peer_ready->pid_namespace == pid_namespace) {
      watches[i] = ProcessWatch::Open(peer_ready->pid);
      read_by_address[i] =
          allow_remote_read_ &&
          ProbeRemoteRead(peer_ready->pid, peer_ready->probe_address, ProbeValue(token_hash, peer));
      HeaderOf(incoming[i])
          ->receiver_reads_sender.store(read_by_address[i] ? 1 : 0, std::memory_order_release);
    }
  }

  // Step 4: attached; then nobody needs the names any more.
  if (absl::Status s = store.Set(absl::StrCat(key, "/attached/", rank), Outcome(status));
      !s.ok() && status.ok()) {
    status = s;
  }
  for (size_t i = 0; i < n && status.ok(); ++i) {
    absl::StatusOr<std::string> text =
        store.Get(absl::StrCat(key, "/attached/", peers[i]), context.deadline);
    if (!text.ok()) {
      status = absl::Status(
          text.status().code(),
          absl::StrCat("waiting for rank ", peers[i], " to attach: ", text.status().message()));
    } else {
      status = AttachOutcome(*text, peers[i]);
    }
  }
  for (ShmSegment& segment : incoming) segment.Unlink();
  if (!status.ok()) return fail(status);

  links.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const bool send_by_address =
        allow_remote_read_ &&
        HeaderOf(outgoing[i])->receiver_reads_sender.load(std::memory_order_acquire) != 0;
    links.push_back(std::make_unique<ShmLink>(rank, peers[i], std::move(outgoing[i]),
                                              std::move(incoming[i]), std::move(watches[i]),
                                              send_by_address, read_by_address[i]));
  }
  return links;
}

}  // namespace

std::unique_ptr<Transport> MakeShmTransport() {
  // Remote reads (cross-memory attach) are opt-in: see ShmLink for the measurements.
  const char* cma = std::getenv("WEFT_SHM_CMA");
  return std::make_unique<ShmTransport>(cma != nullptr && std::strcmp(cma, "1") == 0);
}

}  // namespace weft
