#include "peers.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backoff.h"

namespace weft {

Peers::Peers(int rank, int size, std::vector<std::unique_ptr<Link>> links,
             std::unique_ptr<ShmArena> arena, bool oversubscribed)
    : rank_(rank),
      size_(size),
      oversubscribed_(oversubscribed),
      links_(std::move(links)),
      arena_(std::move(arena)) {}

Peers::~Peers() {
  for (ScratchBuffer& buffer : scratch_) std::free(buffer.data);
}

void Peers::Begin(const Envelope& base, const Deadline& deadline) {
  base_ = base;
  deadline_ = deadline;
}

void Peers::Activate(Link* link) {
  if (std::find(active_.begin(), active_.end(), link) == active_.end()) active_.push_back(link);
}

Transfer Peers::Send(int peer, uint32_t step, const void* data, size_t bytes) {
  Envelope envelope = base_;
  envelope.step = step;
  return SendAs(peer, envelope, data, bytes);
}

Transfer Peers::Recv(int peer, uint32_t step, RecvSink sink, size_t bytes) {
  Envelope envelope = base_;
  envelope.step = step;
  return RecvAs(peer, envelope, sink, bytes);
}

Transfer Peers::SendAs(int peer, const Envelope& envelope, const void* data, size_t bytes) {
  Link* link = links_[peer].get();
  Activate(link);
  return Transfer{link, link->PostSend(envelope, data, bytes), true};
}

Transfer Peers::RecvAs(int peer, const Envelope& envelope, RecvSink sink, size_t bytes) {
  Link* link = links_[peer].get();
  Activate(link);
  return Transfer{link, link->PostRecv(envelope, sink, bytes), false};
}

absl::Status Peers::LinkError(const Link& link, const absl::Status& status) const {
  // Transports name the peer and their own kind ("connection to rank 3 (10.0.0.2:4312)",
  // "shared-memory link with rank 3"); only add what they could not know: which process the
  // peer is.
  const int peer = link.peer();
  const bool named = static_cast<size_t>(peer) < process_names_.size();
  if (absl::StrContains(status.message(), absl::StrCat("rank ", peer))) {
    if (!named) return status;
    return absl::Status(status.code(), absl::StrCat(status.message(), " (rank ", peer, " is ",
                                                    process_names_[peer], ")"));
  }
  return absl::Status(
      status.code(),
      absl::StrCat("link to rank ", peer, " (", link.transport_name(),
                   named ? absl::StrCat(", ", process_names_[peer]) : "", "): ", status.message()));
}

absl::Status Peers::Wait(absl::Span<const Transfer> transfers) {
  Backoff backoff(oversubscribed_);
  while (true) {
    bool moved = false;
    for (Link* link : active_) {
      absl::StatusOr<bool> progressed = link->Progress();
      if (!progressed.ok()) return LinkError(*link, progressed.status());
      moved |= *progressed;
    }
    const Transfer* pending = nullptr;
    for (const Transfer& t : transfers) {
      const bool done = t.is_send ? t.link->SendDone(t.id) : t.link->RecvDone(t.id);
      if (!done) {
        pending = &t;
        break;
      }
    }
    if (pending == nullptr) return absl::OkStatus();
    if (moved) {
      backoff.Reset();
      continue;
    }
    // The message is built only for a wait that ends: this loop runs thousands of times a second.
    if (deadline_.Expired() || deadline_.Aborted()) {
      return deadline_.Check(
          absl::StrCat("waiting to ", pending->is_send ? "send to" : "receive from", " rank ",
                       pending->link->peer(), " (", pending->link->transport_name(), ")"));
    }
    pollfds_.clear();
    for (Link* link : active_) link->AddPollFds(&pollfds_);
    backoff.Pause(&pollfds_);
  }
}

std::byte* Peers::Scratch(size_t bytes, int index) {
  if (scratch_.size() <= static_cast<size_t>(index)) scratch_.resize(index + 1);
  ScratchBuffer& buffer = scratch_[index];
  if (buffer.bytes < bytes) {
    std::free(buffer.data);
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.data = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    buffer.bytes = rounded;
  }
  return buffer.data;
}

}  // namespace weft
