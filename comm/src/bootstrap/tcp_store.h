// The TCP rendezvous store: a small server (run by rank 0, or by the launcher) and its client.
//
// Every connection starts with a hello that carries the job's secret token; the server drops a
// connection whose token is wrong, whose frames are malformed, truncated or oversized, without
// disturbing the other clients. All client calls are bounded by deadlines.
//
// Wire format (little-endian): every frame is u32 length, then `length` bytes of body. The body
// starts with a u8 command. Hello: 'H', u32 version, token bytes. Set: 'S', u32 klen, key, value.
// Get: 'G', key (the reply comes once the key exists). Add: 'A', i64 delta, key. Replies: 'O'
// then payload, or 'E' then an error message. Bodies are capped at kMaxFrameBytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bootstrap/store.h"

namespace weft {

inline constexpr uint32_t kMaxFrameBytes = 64 << 20;

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks a free one; host "" or "0.0.0.0" listens on all
  // interfaces) and serves from a background thread until destroyed.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               std::string token);
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

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, const Deadline& deadline) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;

 private:
  explicit TcpStoreClient(int fd) : fd_(fd) {}

  absl::Mutex mu_;  // one request in flight at a time
  int fd_;
};

}  // namespace weft
