#include "transport/ucx/ucx_worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::ucx {
namespace {

// UCX's TCP transport signals the worker's event descriptor late (milliseconds), so a worker that
// moved data recently keeps being polled instead of sleeping: during a collective the next message
// is usually microseconds away.
constexpr absl::Duration kSpinAfterProgress = absl::Milliseconds(2);

// How long the links together may take to close their endpoints: a clean close flushes what is
// still queued to each peer, which a dead or stalled peer could hold up.
constexpr absl::Duration kCloseBound = absl::Seconds(2);

// How long the worker's end waits for cancelled and discarded requests to complete. They are
// local work (the endpoints are closed by then), so this bound is only reached when UCX is stuck.
constexpr absl::Duration kSettleBound = absl::Seconds(1);

void Discarded(void* request, ucs_status_t status, const ucp_tag_recv_info_t* /*info*/,
               void* user_data) {
  static_cast<RequestState*>(user_data)->Complete(request, status);
}

}  // namespace

std::string StatusText(ucs_status_t status) { return ucs_status_string(status); }

absl::StatusOr<std::shared_ptr<UcxWorker>> UcxWorker::Create(const std::string& who) {
  std::shared_ptr<UcxWorker> worker(new UcxWorker());
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": ucx transport: reading UCX's configuration (UCX_* variables): ", StatusText(s)));
  }
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  const ucs_status_t init = ucp_init(&params, config, &worker->context_);
  ucp_config_release(config);
  if (init != UCS_OK) {
    return absl::UnavailableError(absl::StrCat(
        who, ": ucx transport: ucp_init failed: ", StatusText(init),
        " (check UCX_TLS and UCX_NET_DEVICES; `ucx_info -d` lists what UCX can use here)"));
  }
  ucp_worker_params_t worker_params = {};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  if (ucs_status_t s = ucp_worker_create(worker->context_, &worker_params, &worker->worker_);
      s != UCS_OK) {
    worker->worker_ = nullptr;
    return absl::UnavailableError(
        absl::StrCat(who, ": ucx transport: ucp_worker_create failed: ", StatusText(s)));
  }
  if (ucs_status_t s = ucp_worker_get_efd(worker->worker_, &worker->event_fd_); s != UCS_OK) {
    return absl::UnavailableError(
        absl::StrCat(who, ": ucx transport: ucp_worker_get_efd failed: ", StatusText(s)));
  }
  worker->ready_fd_ = eventfd(1, EFD_CLOEXEC);
  if (worker->ready_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat(who, ": ucx transport: eventfd: ", std::strerror(errno)));
  }
  return worker;
}

bool UcxWorker::Progress() {
  const bool moved = ucp_worker_progress(worker_) != 0;
  if (moved) last_progress_ = absl::Now();
  return moved;
}

void UcxWorker::AddPollFds(std::vector<pollfd>* fds) {
  const bool keep_polling = absl::Now() - last_progress_ < kSpinAfterProgress;
  const bool armed = !keep_polling && ucp_worker_arm(worker_) == UCS_OK;
  fds->push_back(pollfd{armed ? event_fd_ : ready_fd_, POLLIN, 0});
}

absl::Time UcxWorker::CloseDeadline() {
  if (close_deadline_ == absl::InfiniteFuture()) close_deadline_ = absl::Now() + kCloseBound;
  return close_deadline_;
}

void UcxWorker::Adopt(std::unique_ptr<RequestState> state) { adopted_.push_back(std::move(state)); }

void UcxWorker::Settle(absl::Time until) {
  for (;;) {
    ucp_tag_recv_info_t info;
    while (ucp_tag_message_h message = ucp_tag_probe_nb(worker_, 0, 0, 1, &info)) {
      auto state = std::make_unique<RequestState>();
      ucp_request_param_t params = {};
      params.op_attr_mask =
          UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      params.cb.recv = &Discarded;
      params.user_data = state.get();
      // Truncated on purpose: UCX completes the receive with UCS_ERR_MESSAGE_TRUNCATED and
      // releases the message either way. An error here also leaves nothing to track.
      ucs_status_ptr_t request =
          ucp_tag_msg_recv_nbx(worker_, discard_, sizeof(discard_), message, &params);
      if (UCS_PTR_IS_PTR(request)) {
        state->request = request;
        adopted_.push_back(std::move(state));
      }
    }
    bool pending = false;
    for (const std::unique_ptr<RequestState>& state : adopted_) pending = pending || !state->done;
    if (!pending || absl::Now() >= until) return;
    Progress();
  }
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) {
    for (const std::unique_ptr<RequestState>& state : adopted_) {
      if (!state->done && state->request != nullptr) ucp_request_cancel(worker_, state->request);
    }
    Settle(absl::Now() + kSettleBound);
    // What is still running is released to UCX, which completes it as the worker ends (without
    // calling back); only released requests may remain when a worker is destroyed.
    for (const std::unique_ptr<RequestState>& state : adopted_) {
      if (!state->done && state->request != nullptr) {
        ucp_request_free(state->request);
        state->request = nullptr;
      }
    }
    ucp_worker_destroy(worker_);
  }
  adopted_.clear();
  if (ready_fd_ >= 0) close(ready_fd_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

absl::StatusOr<std::string> UcxWorker::Address() const {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker_, &address, &length); s != UCS_OK) {
    return absl::UnavailableError(
        absl::StrCat("ucx transport: ucp_worker_get_address failed: ", StatusText(s)));
  }
  std::string bytes(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  return bytes;
}

}  // namespace weft::ucx
