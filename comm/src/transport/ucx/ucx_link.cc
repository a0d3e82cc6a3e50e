#include "transport/ucx/ucx_link.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weft/kernels/reduce.h"

namespace weft::ucx {

absl::StatusOr<std::unique_ptr<UcxLink>> UcxLink::Connect(int rank, int peer,
                                                          std::shared_ptr<UcxWorker> worker,
                                                          const std::string& remote_address) {
  std::unique_ptr<UcxLink> link(new UcxLink(rank, peer, std::move(worker)));
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  // Peer mode: a peer that dies fails this endpoint's operations instead of leaving them hanging.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxLink::EndpointError;
  params.err_handler.arg = link.get();
  if (ucs_status_t s = ucp_ep_create(link->worker_->get(), &params, &link->endpoint_);
      s != UCS_OK) {
    link->endpoint_ = nullptr;
    return absl::UnavailableError(absl::StrCat(link->Who(),
                                               ": ucp_ep_create failed: ", StatusText(s),
                                               " (can UCX reach the peer's host? see UCX_TLS and "
                                               "UCX_NET_DEVICES)"));
  }
  return link;
}

UcxLink::~UcxLink() {
  const absl::Time until = worker_->CloseDeadline();
  auto in_flight = [this] {
    for (auto* queue : {&sends_, &recvs_}) {
      for (const std::unique_ptr<Op>& op : *queue) {
        if (op->request != nullptr) return true;
      }
    }
    return false;
  };
  // A clean link flushes what it sent before closing; one with messages that will never complete
  // (a failed or abandoned operation) is closed at once, which completes its sends as cancelled,
  // and so is every link once the links' shared bound has passed.
  const bool force = !error_.ok() || !endpoint_error_.ok() || in_flight() || absl::Now() >= until;
  // Receives still posted would never be matched now; cancelling completes them at once.
  for (const std::unique_ptr<Op>& op : recvs_) {
    if (op->request != nullptr) ucp_request_cancel(worker_->get(), op->request);
  }
  if (endpoint_ != nullptr) {
    ucp_request_param_t params = {};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t close = ucp_ep_close_nbx(endpoint_, &params);
    if (UCS_PTR_IS_PTR(close)) {
      while (ucp_request_check_status(close) == UCS_INPROGRESS && absl::Now() < until) {
        worker_->Progress();
      }
      // Released even while still running: UCX then completes it when the worker ends, and
      // aborts there on a close request the application did not release.
      ucp_request_free(close);
    }
  }
  while (in_flight() && absl::Now() < until) worker_->Progress();
  // What UCX still holds after the bound stays alive, buffers included, until the worker ends.
  for (auto* queue : {&sends_, &recvs_}) {
    for (std::unique_ptr<Op>& op : *queue) {
      if (op->request != nullptr) worker_->Adopt(std::move(op));
    }
  }
}

void UcxLink::EndpointError(void* arg, ucp_ep_h /*endpoint*/, ucs_status_t status) {
  UcxLink* link = static_cast<UcxLink*>(arg);
  if (!link->endpoint_error_.ok()) return;
  link->endpoint_error_ = absl::UnavailableError(
      absl::StrCat(link->Who(), " closed: ", StatusText(status),
                   "; the peer process probably exited or crashed, check its output"));
}

void UcxLink::SendCallback(void* request, ucs_status_t status, void* user_data) {
  static_cast<Op*>(user_data)->Complete(request, status);
}

void UcxLink::RecvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data) {
  Op* op = static_cast<Op*>(user_data);
  op->received = status == UCS_OK && info != nullptr ? info->length : 0;
  op->Complete(request, status);
}

void UcxLink::Submit(Op* op, ucp_tag_t tag) {
  ucp_request_param_t params = {};
  // Never complete in place: every completion then goes through the callback, one code path.
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  params.user_data = op;
  params.datatype = ucp_dt_make_iov();
  const size_t entries = op->iov[1].length > 0 ? 2 : 1;
  ucs_status_ptr_t request;
  if (op->is_send) {
    params.cb.send = &UcxLink::SendCallback;
    request = ucp_tag_send_nbx(endpoint_, op->iov, entries, tag, &params);
  } else {
    params.cb.recv = &UcxLink::RecvCallback;
    request = ucp_tag_recv_nbx(worker_->get(), op->iov, entries, tag, ~ucp_tag_t{0}, &params);
  }
  if (UCS_PTR_IS_ERR(request)) {
    op->status = UCS_PTR_STATUS(request);
    op->done = true;
    return;
  }
  op->request = request;
}

uint64_t UcxLink::PostSend(const Envelope& envelope, const void* data, size_t bytes) {
  const uint64_t id = sends_posted_++;
  auto op = std::make_unique<Op>();
  op->is_send = true;
  op->header.bytes = bytes;
  op->header.envelope = envelope;
  op->bytes = bytes;
  op->iov[0] = {&op->header, sizeof(MessageHeader)};
  op->iov[1] = {const_cast<void*>(data), bytes};
  Op* raw = op.get();
  sends_.push_back(std::move(op));
  if (error_.ok() && endpoint_error_.ok()) Submit(raw, MessageTag(rank_, id));
  return id;
}

uint64_t UcxLink::PostRecv(const Envelope& envelope, RecvSink sink, size_t bytes) {
  const uint64_t id = recvs_posted_++;
  auto op = std::make_unique<Op>();
  op->expected = envelope;
  op->bytes = bytes;
  op->sink = sink;
  void* landing = sink.dst;
  if (sink.mode == RecvSink::Mode::kReduce) {
    const size_t element = IsValid(sink.dtype) ? SizeOf(sink.dtype) : 0;
    if (element == 0 || !IsValid(sink.op) || bytes % element != 0) {
      Fail(absl::InvalidArgumentError(absl::StrCat(
               Who(), ": reducing receive #", id, " of ", bytes, " bytes: not a whole number of ",
               element == 0 ? "(invalid type)" : Name(sink.dtype),
               " elements, or an invalid reduction operator")))
          .IgnoreError();
    }
    op->staging = std::make_unique_for_overwrite<std::byte[]>(bytes);
    landing = op->staging.get();
  }
  op->iov[0] = {&op->header, sizeof(MessageHeader)};
  op->iov[1] = {landing, bytes};
  Op* raw = op.get();
  recvs_.push_back(std::move(op));
  if (error_.ok() && endpoint_error_.ok()) Submit(raw, MessageTag(peer_, id));
  return id;
}

absl::StatusOr<bool> UcxLink::Progress() {
  if (!error_.ok()) return error_;
  bool moved = worker_->Progress();
  // Operations retire in the order they were posted.
  while (!sends_.empty() && sends_.front()->done) {
    if (sends_.front()->status != UCS_OK) {
      if (!endpoint_error_.ok()) return Fail(endpoint_error_);
      return Fail(absl::UnavailableError(
          absl::StrCat(Who(), ": send #", sends_done_, " of ", sends_.front()->bytes,
                       " bytes failed: ", StatusText(sends_.front()->status))));
    }
    sends_.pop_front();
    ++sends_done_;
    moved = true;
  }
  while (!recvs_.empty() && recvs_.front()->done) {
    if (absl::Status s = Finish(*recvs_.front(), recvs_done_); !s.ok()) return s;
    recvs_.pop_front();
    ++recvs_done_;
    moved = true;
  }
  // Messages still to move on a failed endpoint never will (receives would wait in vain).
  if (!endpoint_error_.ok() && !(sends_.empty() && recvs_.empty())) return Fail(endpoint_error_);
  return moved;
}

absl::Status UcxLink::Finish(Op& op, uint64_t id) {
  if (op.status == UCS_ERR_MESSAGE_TRUNCATED) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        Who(), ": receive #", id, ": expected ", DescribeEnvelope(op.expected), " (", op.bytes,
        " bytes) but the peer sent a larger message: the ranks called different collectives")));
  }
  if (op.status != UCS_OK) {
    return Fail(absl::UnavailableError(
        absl::StrCat(Who(), ": receive #", id, " failed: ", StatusText(op.status))));
  }
  if (op.received < sizeof(MessageHeader) || op.header.magic != kHeaderMagic ||
      op.received != sizeof(MessageHeader) + op.header.bytes) {
    return Fail(absl::DataLossError(
        absl::StrCat(Who(), ": receive #", id, ": malformed message of ", op.received,
                     " bytes: the peer is not a Weft rank of this version")));
  }
  if (!(op.header.envelope == op.expected) || op.header.bytes != op.bytes) {
    const absl::Status mismatch =
        EnvelopeMismatch(op.expected, op.bytes, op.header.envelope, op.header.bytes);
    return Fail(absl::Status(mismatch.code(),
                             absl::StrCat(Who(), ": receive #", id, ": ", mismatch.message())));
  }
  if (op.sink.mode == RecvSink::Mode::kReduce && op.bytes > 0) {
    op.sink.ReduceArrived(0, op.staging.get(), op.bytes / SizeOf(op.sink.dtype));
  }
  return absl::OkStatus();
}

absl::Status UcxLink::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
  return error_;
}

std::string UcxLink::Who() const {
  return absl::StrCat("rank ", rank_, ": ucx link to rank ", peer_);
}

}  // namespace weft::ucx
