// The TCP rendezvous store: a small server (run by rank 0, or by the launcher) and its client.
//
// Every connection starts with a hello that carries the job's secret token; the server drops a
// connection whose token is wrong, whose frames are malformed, truncated or oversized, or that
// stays silent, without disturbing the other clients. All client calls are bounded by deadlines.
//
// Wire format (little-endian). Every frame is a u32 length, then `length` bytes of body; the body
// starts with a u8 command.
//   Hello  'H', u32 protocol version, token bytes    -> 'O' | 'E' message | 'V' u32 version
//   Set    'S', u32 key length, key, value            -> 'O'
//   Get    'G', u32 wait_ms, key                      -> 'O' value | 'T'
//   Wake   'W'                                        -> (none)
//   Add    'A', i64 delta, key                        -> 'O' i64 new value | 'E' message
// The hello must be the first frame and must arrive within kStoreHandshakeTimeout; a wrong token
// is answered 'E' and a different protocol version 'V' (the server's), and the server then closes
// the connection. Set overwrites an existing key. Get answers 'O' as soon as the key exists, or
// 'T' ("not yet") once wait_ms has passed (the server caps it at kStoreMaxGetWaitMs): the client
// waits in rounds of at most kStoreGetRoundMs, so a request never outlives the caller's deadline
// by more than one round and the stream never holds an unanswered request when a Get gives up.
// Wake lets threads share one client: it ends a parked Get at once with 'T' and is ignored when no
// Get is parked; it is never answered, so it cannot put the stream out of step.
// Add keeps the counter as decimal text (Get returns that text) and answers 'E' when the key
// holds something else or the sum overflows; the connection stays usable. Any other malformed
// frame, an unknown command, or a length above the cap (kMaxFrameBytes, or kStoreMaxHelloBytes
// before the hello) is answered 'E' and the connection is closed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bootstrap/store.h"

namespace weft {

inline constexpr uint32_t kMaxFrameBytes = 64 << 20;
// Before the hello a peer is unauthenticated: it may not make the server buffer more than this.
inline constexpr uint32_t kStoreMaxHelloBytes = 4096;
// A connection that has not presented a valid hello by then is closed (half-open, port scanners).
inline constexpr absl::Duration kStoreHandshakeTimeout = absl::Seconds(5);
// The longest one Get round waits on the server, as asked by the client and as capped by it.
inline constexpr int kStoreGetRoundMs = 100;
inline constexpr int kStoreMaxGetWaitMs = 10000;
// How long a request may wait for its answer beyond the server-side wait before the store counts
// as unresponsive and the connection is given up.
inline constexpr absl::Duration kStoreRequestTimeout = absl::Seconds(30);

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks a free one; host "" or "0.0.0.0" listens on all
  // interfaces) and serves from a background thread until destroyed. `token` must not be empty.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               std::string token);
  // Wakes the serving thread, joins it and closes every connection; never waits on a client.
  ~TcpStoreServer();

  int port() const { return port_; }

 private:
  TcpStoreServer() = default;
  void Serve();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends Serve()
  int port_ = 0;
  std::string token_;
  std::thread thread_;
};

class TcpStoreClient final : public Store {
 public:
  // Retries the connection until `deadline` (the server may start after its clients), then
  // presents `token`. A wrong token fails with PermissionDenied.
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                                 const std::string& token,
                                                                 const Deadline& deadline);
  ~TcpStoreClient() override;

  // A second, independent connection to the same store with the same token: for a thread that
  // parks long Gets (a communicator's fault watch), so the other users of this client never wait
  // out its rounds.
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> ConnectAgain(const Deadline& deadline) const;

  // Threads may share a client: requests are served one at a time in arrival order, each waiting
  // for those ahead of it. Set and Add wait at most kStoreRequestTimeout for the store's answer.
  // After any transport failure (the store closed the connection, stopped answering, or a wait
  // was cut short by the caller's deadline while a request was unanswered) every later call fails
  // with Unavailable.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, const Deadline& deadline) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;

 private:
  // When a request must be answered: by `hard` in any case; past `soft`, as soon as the caller's
  // deadline (if any) has expired or been aborted.
  struct Bound {
    absl::Time hard;
    absl::Time soft;
    const Deadline* caller = nullptr;
  };

  TcpStoreClient(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}

  // Requests take turns in arrival order, one in flight at a time: a Get that polls in rounds
  // must not starve the Set another thread needs to make (a plain mutex, re-taken at once by the
  // polling thread, would). The connection state below belongs to the thread whose turn it is.
  class Turn {
   public:
    explicit Turn(TcpStoreClient& client);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    TcpStoreClient& client_;
  };

  // Sends one request frame (`body` without its length prefix) and returns the reply body.
  // Any failure leaves the stream out of step, so it closes the connection for good.
  // `wakeable`: a Get round that another thread's request may end early (see WakeParkedGet).
  absl::StatusOr<std::string> Roundtrip(absl::string_view body, const Bound& bound,
                                        absl::string_view what, bool wakeable = false);
  absl::Status SendAll(absl::string_view bytes, const Bound& bound, absl::string_view what);
  absl::Status RecvAll(char* data, size_t size, const Bound& bound, absl::string_view what);
  absl::Status AwaitFd(short events, const Bound& bound, absl::string_view what);
  // The error for a reply that is neither what `what` expects nor an 'E' from the server.
  absl::Status BadReply(absl::string_view reply, absl::string_view what);
  void Break(const absl::Status& cause);
  // Asks the store to end the Get round parked on this connection now, so the request that
  // queued behind it need not wait out the round.
  void WakeParkedGet() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // std::mutex rather than absl::Mutex: the system's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex's ordering and reports false races.
  std::mutex mu_;
  std::condition_variable turn_done_;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;  // a Get round is sent and awaits its answer
  bool woken_ ABSL_GUARDED_BY(mu_) = false;   // a wake was sent for that round
  std::string unsent_wake_ ABSL_GUARDED_BY(mu_);
  int fd_;                   // -1 once broken
  absl::Status broken_;      // why fd_ was closed
  const std::string where_;  // "host:port", for messages
  std::string host_;         // what Connect was given, for ConnectAgain
  int port_ = 0;
  std::string token_;
};

}  // namespace weft
