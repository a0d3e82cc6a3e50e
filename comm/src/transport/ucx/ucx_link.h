// UcxLink: a Link to one peer over a UCP endpoint, with tag matching doing the ordering.
//
// Every message is one tagged UCP message: a 48-byte header (magic, payload size, the Envelope)
// followed by the payload, sent as a two-entry iov so the payload is never copied by Weft. The
// tag names the sender and the message's index on the link (see MessageTag), so a receive
// matches exactly the message it was posted for, whatever order UCX delivers them in.
//
// A copying receive lands the payload straight in its destination; a reducing receive lands it
// in a staging buffer and reduces from there once the message is complete. Receives finish in
// the order they were posted: the header is checked (envelope and size) before the data counts
// as delivered, and a mismatch fails the link with both envelopes in the message. Unlike TCP,
// a copying receive whose header turns out wrong may already have written its destination; the
// operation fails either way.
//
// Not thread-safe: one thread drives the links of a worker at a time.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/link.h"
#include "transport/ucx/ucx_worker.h"

namespace weft::ucx {

inline constexpr uint32_t kHeaderMagic = 0x58554657;  // "WFUX"

struct MessageHeader {
  uint32_t magic = kHeaderMagic;
  uint32_t reserved = 0;
  uint64_t bytes = 0;
  Envelope envelope;
};
static_assert(sizeof(MessageHeader) == 48, "MessageHeader is the wire format");

// Tag layout: bit 63 marks connection hellos; bits 44-62 hold the sender's rank; bits 0-43 the
// message's index among the sender's messages to this receiver (wrapping after 2^44).
inline constexpr int kRankShift = 44;
inline constexpr uint64_t kHelloBit = uint64_t{1} << 63;
inline constexpr uint64_t kIndexMask = (uint64_t{1} << kRankShift) - 1;
inline constexpr int kMaxRanks = 1 << 19;

inline ucp_tag_t MessageTag(int sender, uint64_t index) {
  return (static_cast<uint64_t>(sender) << kRankShift) | (index & kIndexMask);
}
inline ucp_tag_t HelloTag(int sender) {
  return kHelloBit | (static_cast<uint64_t>(sender) << kRankShift);
}

class UcxLink final : public Link {
 public:
  // Creates the endpoint to `peer`, whose worker address is `remote_address`. UCX connects it
  // lazily, on the first message.
  static absl::StatusOr<std::unique_ptr<UcxLink>> Connect(int rank, int peer,
                                                          std::shared_ptr<UcxWorker> worker,
                                                          const std::string& remote_address);
  // Flushes and closes the endpoint, or after a failure cancels what is in flight and closes it
  // at once; bounded either way (a dead peer cannot hold it up for long). Messages UCX still
  // holds after the bound go to the worker, which releases them before it ends.
  ~UcxLink() override;
  UcxLink(const UcxLink&) = delete;
  UcxLink& operator=(const UcxLink&) = delete;

  uint64_t PostSend(const Envelope& envelope, const void* data, size_t bytes) override;
  uint64_t PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) override;
  absl::StatusOr<bool> Progress() override;
  bool SendDone(uint64_t id) const override { return id < sends_done_; }
  bool RecvDone(uint64_t id) const override { return id < recvs_done_; }
  void AddPollFds(std::vector<pollfd>* fds) const override { worker_->AddPollFds(fds); }
  int peer() const override { return peer_; }
  absl::string_view transport_name() const override { return "ucx"; }

  ucp_ep_h endpoint() const { return endpoint_; }

 private:
  UcxLink(int rank, int peer, std::shared_ptr<UcxWorker> worker)
      : rank_(rank), peer_(peer), worker_(std::move(worker)) {}

  // Called by UCX when the endpoint fails (the peer died or left, the network broke).
  static void EndpointError(void* arg, ucp_ep_h endpoint, ucs_status_t status);

  // One message: described when posted, in flight once submitted to UCX. Heap-allocated so that
  // UCX's callbacks can hold its address; one UCX still holds when the link goes away is handed,
  // buffers and all, to the worker (UcxWorker::Adopt).
  struct Op : RequestState {
    bool is_send = false;
    size_t received = 0;   // bytes that arrived (receives)
    MessageHeader header;  // sent, or where a receive lands the peer's header
    Envelope expected;
    size_t bytes = 0;
    RecvSink sink;
    std::unique_ptr<std::byte[]> staging;  // reducing receives
    ucp_dt_iov_t iov[2] = {};
  };

  static void SendCallback(void* request, ucs_status_t status, void* user_data);
  static void RecvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);

  // Submits `op` (already described) to UCX; failures are recorded on the op.
  void Submit(Op* op, ucp_tag_t tag);
  absl::Status Finish(Op& op, uint64_t id);
  absl::Status Fail(absl::Status status);
  std::string Who() const;

  const int rank_;
  const int peer_;
  std::shared_ptr<UcxWorker> worker_;
  ucp_ep_h endpoint_ = nullptr;

  std::deque<std::unique_ptr<Op>> sends_;  // sends_[0] has id sends_done_
  uint64_t sends_posted_ = 0;
  uint64_t sends_done_ = 0;
  std::deque<std::unique_ptr<Op>> recvs_;  // recvs_[0] has id recvs_done_
  uint64_t recvs_posted_ = 0;
  uint64_t recvs_done_ = 0;
  absl::Status error_;  // the first failure; final
  // Why UCX failed the endpoint. It fails the link only once the link has messages to move: a
  // peer that finished the last operation and left first is no error for what remains of it.
  absl::Status endpoint_error_;
};

}  // namespace weft::ucx
