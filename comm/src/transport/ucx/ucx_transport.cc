#include "transport/ucx/ucx_transport.h"

#include <ucp/api/ucp.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backoff.h"
#include "log.h"
#include "transport/ucx/ucx_link.h"
#include "transport/ucx/ucx_worker.h"

namespace weft {
namespace {

// Far above a real token plus a communicator name; a larger hello is not a Weft hello.
constexpr size_t kMaxHelloBytes = 8192;

std::string AddressKey(int rank) { return absl::StrCat("ucx/addr/", rank); }

absl::Status Prefixed(int rank, absl::string_view doing, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("rank ", rank, ": ucx transport: ", doing, ": ",
                                                  status.message()));
}

// One hello in flight: sent to, or received from, one peer.
struct Hello : ucx::RequestState {
  int peer = 0;
  bool is_send = false;
  size_t length = 0;
  std::string bytes;
};

void HelloSent(void* request, ucs_status_t status, void* user_data) {
  static_cast<Hello*>(user_data)->Complete(request, status);
}

void HelloReceived(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                   void* user_data) {
  Hello* hello = static_cast<Hello*>(user_data);
  hello->length = info != nullptr ? info->length : 0;
  hello->Complete(request, status);
}

class UcxTransport final : public Transport {
 public:
  absl::string_view name() const override { return "ucx"; }

  absl::StatusOr<std::vector<std::unique_ptr<Link>>> Connect(
      const ConnectContext& context, const std::vector<int>& peers) override;

 private:
  absl::Status Greet(const ConnectContext& context, ucx::UcxWorker& worker,
                     const std::vector<std::unique_ptr<ucx::UcxLink>>& links);
};

absl::StatusOr<std::vector<std::unique_ptr<Link>>> UcxTransport::Connect(
    const ConnectContext& context, const std::vector<int>& peers) {
  std::vector<std::unique_ptr<Link>> result;
  if (peers.empty()) return result;
  const int rank = context.rank;
  if (context.store == nullptr) return absl::InvalidArgumentError("ucx transport: no store");
  std::set<int> seen;
  for (int peer : peers) {
    if (peer < 0 || peer >= context.size || peer == rank || !seen.insert(peer).second ||
        context.size > ucx::kMaxRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": ucx transport: bad peer list [", absl::StrJoin(peers, ","),
                       "] for a communicator of size ", context.size));
    }
  }

  absl::StatusOr<std::shared_ptr<ucx::UcxWorker>> worker =
      ucx::UcxWorker::Create(absl::StrCat("rank ", rank));
  if (!worker.ok()) return worker.status();
  absl::StatusOr<std::string> address = (*worker)->Address();
  if (!address.ok()) return Prefixed(rank, "getting the worker address", address.status());
  // Hex: the address is binary, and store values travel as text in tools and logs.
  if (absl::Status s = context.store->Set(AddressKey(rank), absl::BytesToHexString(*address));
      !s.ok()) {
    return Prefixed(rank, "publishing the worker address", s);
  }

  std::vector<std::unique_ptr<ucx::UcxLink>> links;
  for (int peer : peers) {
    absl::StatusOr<std::string> hex = context.store->Get(AddressKey(peer), context.deadline);
    if (!hex.ok()) {
      return Prefixed(rank, absl::StrCat("waiting for rank ", peer, " to publish its address"),
                      hex.status());
    }
    absl::StatusOr<std::unique_ptr<ucx::UcxLink>> link =
        ucx::UcxLink::Connect(rank, peer, *worker, absl::HexStringToBytes(*hex));
    if (!link.ok()) return link.status();
    links.push_back(*std::move(link));
  }
  if (absl::Status s = Greet(context, **worker, links); !s.ok()) return s;

  if (DebugEnabled(DebugLevel::kInfo)) {
    DebugLog(DebugLevel::kInfo,
             absl::StrCat("rank ", rank, ": ucx transport: connected to ranks ",
                          absl::StrJoin(peers, ","), " (UCX ", ucp_get_version_string(), ")"));
  }
  for (std::unique_ptr<ucx::UcxLink>& link : links) result.push_back(std::move(link));
  return result;
}

absl::Status UcxTransport::Greet(const ConnectContext& context, ucx::UcxWorker& worker,
                                 const std::vector<std::unique_ptr<ucx::UcxLink>>& links) {
  const int rank = context.rank;
  const std::string mine = absl::StrCat(context.token, "\n", context.unique_name);
  std::vector<std::unique_ptr<Hello>> hellos;  // sends, then receives
  auto submit = [&](ucx::UcxLink& link, bool send) -> absl::Status {
    auto hello = std::make_unique<Hello>();
    hello->peer = link.peer();
    hello->is_send = send;
    ucp_request_param_t params = {};
    params.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    params.user_data = hello.get();
    ucs_status_ptr_t request;
    if (send) {
      hello->bytes = mine;
      params.cb.send = &HelloSent;
      request = ucp_tag_send_nbx(link.endpoint(), hello->bytes.data(), hello->bytes.size(),
                                 ucx::HelloTag(rank), &params);
    } else {
      hello->bytes.resize(kMaxHelloBytes);
      params.cb.recv = &HelloReceived;
      request = ucp_tag_recv_nbx(worker.get(), hello->bytes.data(), hello->bytes.size(),
                                 ucx::HelloTag(link.peer()), ~ucp_tag_t{0}, &params);
    }
    if (UCS_PTR_IS_ERR(request)) {
      return absl::UnavailableError(
          absl::StrCat(send ? "sending the hello to rank " : "receiving the hello of rank ",
                       link.peer(), ": ", ucx::StatusText(UCS_PTR_STATUS(request))));
    }
    hello->request = request;
    hellos.push_back(std::move(hello));
    return absl::OkStatus();
  };
  absl::Status status;
  for (const auto& link : links) {
    if (status.ok()) status = submit(*link, false);
    if (status.ok()) status = submit(*link, true);
  }

  Backoff backoff;
  while (status.ok()) {
    bool pending = false;
    for (const auto& hello : hellos) pending = pending || !hello->done;
    if (!pending) break;
    if (worker.Progress()) {
      backoff.Reset();
      continue;
    }
    status = context.deadline.Check(
        "exchanging ucx hellos (is every peer's UCX able to reach "
        "this host? compare UCX_TLS and UCX_NET_DEVICES)");
    if (status.ok()) backoff.Pause();
  }
  for (const auto& hello : hellos) {
    if (!status.ok()) break;
    const bool received = !hello->is_send;
    if (hello->status != UCS_OK) {
      status = absl::UnavailableError(
          absl::StrCat(received ? "receiving the hello of rank " : "sending the hello to rank ",
                       hello->peer, ": ", ucx::StatusText(hello->status)));
    } else if (received && absl::string_view(hello->bytes.data(), hello->length) != mine) {
      status = absl::PermissionDeniedError(
          absl::StrCat("rank ", hello->peer,
                       " presented another job's token or communicator: "
                       "is a second job using the same store?"));
    }
  }
  if (!status.ok()) {
    // UCX still holds the unfinished hellos: the worker keeps them until it cancels them.
    for (std::unique_ptr<Hello>& hello : hellos) {
      if (!hello->done) worker.Adopt(std::move(hello));
    }
    return Prefixed(rank, "greeting the peers", status);
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Transport> MakeUcxTransport() { return std::make_unique<UcxTransport>(); }

}  // namespace weft
