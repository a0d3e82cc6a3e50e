// The rendezvous store's server, which anything on the network can reach: the input is what a
// client sends on one connection. The first byte picks how it starts: raw bytes (no hello), or a
// valid hello first, so the fuzzer also reaches the commands behind authentication. After each
// input a legitimate client must still be served: no crash, no hang, no disturbed job.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "bootstrap/tcp_store.h"
#include "fuzz_check.h"

namespace {

constexpr char kToken[] = "fuzz-store-token";
// The server's protocol version, as its hello carries it (tcp_store_wire.h).
constexpr uint32_t kProtocolVersion = 1;

struct Fixture {
  std::unique_ptr<weft::TcpStoreServer> server;
  std::unique_ptr<weft::TcpStoreClient> client;
  uint64_t round = 0;
};

Fixture& TheFixture() {
  static Fixture* fixture = [] {
    auto* f = new Fixture;
    absl::StatusOr<std::unique_ptr<weft::TcpStoreServer>> server =
        weft::TcpStoreServer::Start("127.0.0.1", 0, kToken);
    FUZZ_CHECK(server.ok());
    f->server = *std::move(server);
    absl::StatusOr<std::unique_ptr<weft::TcpStoreClient>> client = weft::TcpStoreClient::Connect(
        "127.0.0.1", f->server->port(), kToken, weft::Deadline::In(absl::Seconds(10)));
    FUZZ_CHECK(client.ok());
    f->client = *std::move(client);
    return f;
  }();
  return *fixture;
}

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;  // the server gave up on us: allowed
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Fixture& f = TheFixture();
  std::string bytes;
  if (data[0] % 2 == 1) {
    std::string hello = "H";
    PutU32(&hello, kProtocolVersion);
    hello += kToken;
    PutU32(&bytes, static_cast<uint32_t>(hello.size()));
    bytes += hello;
  }
  bytes.append(reinterpret_cast<const char*>(data) + 1, size - 1);

  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(f.server->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  if (SendAll(fd, bytes)) shutdown(fd, SHUT_WR);
  // Drain what the server answers until it closes, for a bounded time (a parked Get may keep a
  // connection open; closing ours ends it).
  char buffer[4096];
  for (int i = 0; i < 20; ++i) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5) <= 0) continue;
    if (recv(fd, buffer, sizeof(buffer), 0) <= 0) break;
  }
  close(fd);

  // The job's own client is still served.
  const std::string key = absl::StrCat("fuzz-check/", f.round++);
  FUZZ_CHECK(f.client->Set(key, "ok").ok());
  absl::StatusOr<std::string> value = f.client->Get(key, weft::Deadline::In(absl::Seconds(10)));
  FUZZ_CHECK(value.ok() && *value == "ok");
  return 0;
}
