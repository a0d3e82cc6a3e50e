// UcxWorker: one UCP context and worker, shared by every UCX link of a communicator.
//
// UCP moves all of a worker's endpoints from one progress call, so the links of a communicator
// share one worker: each link's Progress() progresses it, which also moves its neighbours'
// messages. The worker runs in UCS_THREAD_MODE_SERIALIZED: Weft's engine drives the links from
// one thread at a time, but not always the same one (a waiting caller, or the progress thread).
//
// UCX reads its own configuration from the UCX_* environment (UCX_TLS, UCX_NET_DEVICES, ...),
// which is how a job picks InfiniBand, RoCE or TCP underneath.
//
// The worker ends last, after every link has closed its endpoint, and it ends clean: UCX asserts
// (aborting the process) when a worker is destroyed with requests the application never released,
// and warns about messages nobody received. So requests whose owners went away first (a failed
// operation's messages) are adopted by the worker, and its end cancels them, gives UCX a bounded
// moment to complete them, releases every one, and discards the unmatched messages.
#pragma once

#include <poll.h>
#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace weft::ucx {

// One UCP request Weft submitted with a completion callback, and the buffers UCX reads or writes
// until it calls back: owners derive from it to keep those buffers alive alongside the request.
struct RequestState {
  virtual ~RequestState() = default;

  // The callbacks' common part: records the outcome and releases the request to UCX.
  void Complete(void* ucx_request, ucs_status_t outcome) {
    ucp_request_free(ucx_request);
    request = nullptr;
    status = outcome;
    done = true;
  }

  void* request = nullptr;  // UCX's, from submission until done
  bool done = false;        // UCX called back
  ucs_status_t status = UCS_OK;
};

class UcxWorker {
 public:
  // Creates the context (tag matching) and the worker. `who` ("rank 3") prefixes errors.
  static absl::StatusOr<std::shared_ptr<UcxWorker>> Create(const std::string& who);
  // Settles the adopted requests and the unexpected messages (bounded), then destroys the worker.
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }

  // The worker's address, which a peer needs to create an endpoint to it.
  absl::StatusOr<std::string> Address() const;

  // Progresses every endpoint of the worker; whether anything happened.
  bool Progress();

  // What an idle waiter polls to sleep until the worker has something to do: the worker's event
  // descriptor once armed; or a descriptor that is always readable, so the waiter keeps polling,
  // when events are already pending (arming refused) or the worker moved data moments ago.
  void AddPollFds(std::vector<pollfd>* fds);

  // When the links' endpoint closes must be over. Fixed by the first call, so that the links of a
  // communicator share one bound however many they are: each flush may wait on a slow peer.
  absl::Time CloseDeadline();

  // Keeps a submitted request whose owner is going away, with its buffers, until UCX has called
  // back or the worker ends. Receives among them are cancelled when the worker ends.
  void Adopt(std::unique_ptr<RequestState> state);

 private:
  UcxWorker() = default;

  // Progresses the worker until every adopted request is done or `until` passes, meanwhile
  // receiving, into a scratch buffer, every message that arrived and matched no receive.
  void Settle(absl::Time until);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // the worker's; UCX owns it
  int ready_fd_ = -1;  // an eventfd whose counter is never read: always readable
  absl::Time last_progress_ = absl::InfinitePast();
  absl::Time close_deadline_ = absl::InfiniteFuture();  // until the first CloseDeadline()
  // Released only after the worker is destroyed: until then UCX may still write their buffers.
  std::vector<std::unique_ptr<RequestState>> adopted_;
  // Where discarded messages land (truncated): their contents are never read.
  char discard_[64] = {};
};

// "Connection reset by remote peer": UCX's words for a status.
std::string StatusText(ucs_status_t status);

}  // namespace weft::ucx
