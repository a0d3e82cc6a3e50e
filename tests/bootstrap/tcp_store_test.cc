// The TCP store with real sockets and real processes: rendezvous across forked clients, waits that
// end by data, deadline or abort, token checks, and peers that misbehave on purpose.
#include "bootstrap/tcp_store.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "loopback.h"
#include "time_scale.h"

namespace weft {
namespace {

using ::weft::testing::DialLoopback;
using ::weft::testing::Scaled;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
constexpr unsigned kChildAlarmSeconds = 8;

// Runs `body` in a forked child that the kernel kills if it outlives kChildAlarmSeconds. The child
// leaves with _exit: it must not run the parent's destructors (the server's would stop the
// parent's server through the shared eventfd).
pid_t Spawn(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(kChildAlarmSeconds);
    _exit(body());
  }
  return pid;
}

// The child's exit code; -1 (after killing it) when it is still running after `limit`.
int Join(pid_t pid, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// Child-side check: reports and fails the child without gtest, which belongs to the parent.
#define CHILD_CHECK(condition, ...)                                    \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "child %d: %s: %s\n", getpid(), #condition, \
                   absl::StrCat(__VA_ARGS__).c_str());                 \
      return 1;                                                        \
    }                                                                  \
  } while (0)

std::string Frame(absl::string_view body) {
  std::string frame;
  const auto size = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>(size >> (8 * i)));
  frame.append(body.data(), body.size());
  return frame;
}

std::string HelloFrame(absl::string_view token) {
  return Frame(absl::StrCat(absl::string_view("H\x01\x00\x00\x00", 5), token));
}

bool SendRaw(int fd, absl::string_view bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// Reads until the server closes the connection. Returns when that happened, or absl::InfiniteFuture
// if it had not by `limit`; what arrived is appended to `received`.
absl::Time AwaitClose(int fd, absl::Time limit, std::string* received = nullptr) {
  char buffer[4096];
  while (true) {
    const absl::Duration left = limit - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::InfiniteFuture();
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      if (received != nullptr) received->append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) return absl::Now();
  }
}

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
        TcpStoreServer::Start("127.0.0.1", 0, kToken);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& token = kToken) {
    return TcpStoreClient::Connect("127.0.0.1", port_, token,
                                   Deadline::In(Scaled(absl::Seconds(5))));
  }

  std::string Where() const { return absl::StrCat("127.0.0.1:", port_); }

  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
};

TEST_F(TcpStoreTest, SetGetAndAddAcrossProcesses) {
  constexpr int kRanks = 4;
  std::vector<pid_t> children;
  for (int rank = 0; rank < kRanks; ++rank) {
    children.push_back(Spawn([&, rank]() -> int {
      auto client = TcpStoreClient::Connect("127.0.0.1", port_, kToken,
                                            Deadline::In(Scaled(absl::Seconds(5))));
      CHILD_CHECK(client.ok(), client.status().ToString());
      for (int i = 0; i < 10; ++i) {
        absl::StatusOr<int64_t> added = (*client)->Add("joined", 1);
        CHILD_CHECK(added.ok(), added.status().ToString());
      }
      absl::Status set = (*client)->Set(absl::StrCat("rank/", rank), absl::StrCat("value-", rank));
      CHILD_CHECK(set.ok(), set.ToString());
      for (int peer = 0; peer < kRanks; ++peer) {
        absl::StatusOr<std::string> value =
            (*client)->Get(absl::StrCat("rank/", peer), Deadline::In(Scaled(absl::Seconds(5))));
        CHILD_CHECK(value.ok(), value.status().ToString());
        CHILD_CHECK(*value == absl::StrCat("value-", peer), *value);
      }
      return 0;
    }));
  }
  for (pid_t child : children) EXPECT_EQ(Join(child, Scaled(absl::Seconds(10))), 0);

  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> joined =
      (*client)->Get("joined", Deadline::In(Scaled(absl::Seconds(1))));
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(*joined, "40");
  absl::StatusOr<int64_t> unchanged = (*client)->Add("joined", 0);
  ASSERT_TRUE(unchanged.ok()) << unchanged.status();
  EXPECT_EQ(*unchanged, 40);
}

TEST_F(TcpStoreTest, SetOverwritesAndAddRejectsNonIntegers) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("key", "first").ok());
  ASSERT_TRUE((*client)->Set("key", "second").ok());
  EXPECT_EQ(*(*client)->Get("key", Deadline::In(Scaled(absl::Seconds(1)))), "second");
  ASSERT_TRUE((*client)->Set("empty", "").ok());
  EXPECT_EQ(*(*client)->Get("empty", Deadline::In(Scaled(absl::Seconds(1)))), "");

  ASSERT_TRUE((*client)->Set("text", "abc").ok());
  absl::StatusOr<int64_t> bad = (*client)->Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "not an integer")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), Where())) << bad.status();

  ASSERT_TRUE((*client)->Set("max", "9223372036854775807").ok());
  EXPECT_EQ((*client)->Add("max", 1).status().code(), absl::StatusCode::kFailedPrecondition);

  // The refusals did not cost the connection.
  EXPECT_EQ(*(*client)->Add("counter", 5), 5);
  EXPECT_EQ(*(*client)->Add("counter", -7), -2);
  EXPECT_EQ(*(*client)->Get("counter", Deadline::In(Scaled(absl::Seconds(1)))), "-2");
}

TEST_F(TcpStoreTest, GetWaitsForAKeySetLaterByAnotherProcess) {
  const pid_t setter = Spawn([&]() -> int {
    absl::SleepFor(absl::Milliseconds(300));
    auto client =
        TcpStoreClient::Connect("127.0.0.1", port_, kToken, Deadline::In(Scaled(absl::Seconds(5))));
    CHILD_CHECK(client.ok(), client.status().ToString());
    absl::Status set = (*client)->Set("late", "worth the wait");
    CHILD_CHECK(set.ok(), set.ToString());
    return 0;
  });
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value =
      (*client)->Get("late", Deadline::In(Scaled(absl::Seconds(5))));
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "worth the wait");
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, Scaled(absl::Seconds(4)));
  EXPECT_EQ(Join(setter, Scaled(absl::Seconds(5))), 0);
}

TEST_F(TcpStoreTest, GetDeadlineExpiresAndTheClientStillWorks) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> missing =
      (*client)->Get("missing", Deadline::In(absl::Milliseconds(350)));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "'missing'")) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), Where())) << missing.status();
  EXPECT_GE(waited, absl::Milliseconds(340));
  EXPECT_LT(waited, absl::Milliseconds(350) + Scaled(absl::Seconds(1)));

  // The stream is still in step: the next requests get their own answers.
  ASSERT_TRUE((*client)->Set("after", "fine").ok());
  EXPECT_EQ(*(*client)->Get("after", Deadline::In(Scaled(absl::Seconds(1)))), "fine");
  EXPECT_EQ(*(*client)->Add("n", 3), 3);
  // An expired deadline still returns a key that is there.
  EXPECT_EQ(*(*client)->Get("after", Deadline::In(-absl::Seconds(1))), "fine");
}

TEST_F(TcpStoreTest, AbortCancelsAWaitingGetPromptly) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  std::atomic<bool> aborted{false};
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(200));
    aborted.store(true);
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value =
      (*client)->Get("never", Deadline::In(absl::InfiniteDuration(), &aborted));
  const absl::Duration waited = absl::Now() - start;
  aborter.join();
  EXPECT_EQ(value.status().code(), absl::StatusCode::kCancelled) << value.status();
  EXPECT_GE(waited, absl::Milliseconds(190));
  EXPECT_LT(waited, absl::Milliseconds(200) + Scaled(absl::Milliseconds(600)));

  // An already-aborted deadline returns at once; the client stays usable.
  EXPECT_EQ(
      (*client)->Get("never", Deadline::In(Scaled(absl::Seconds(5)), &aborted)).status().code(),
      absl::StatusCode::kCancelled);
  EXPECT_TRUE((*client)->Set("still", "usable").ok());
}

TEST_F(TcpStoreTest, ThreadsShareOneClient) {
  auto connected = Connect();
  ASSERT_TRUE(connected.ok()) << connected.status();
  TcpStoreClient& client = **connected;
  // A thread waiting on a key must not keep another thread from setting it through the same
  // client: that is how sub-communicators share their parent's store.
  std::thread waiter([&] {
    absl::StatusOr<std::string> value =
        client.Get("handoff", Deadline::In(Scaled(absl::Seconds(5))));
    EXPECT_TRUE(value.ok()) << value.status();
    if (value.ok()) {
      EXPECT_EQ(*value, "done");
    }
  });
  // Nor make it wait out the Get's rounds: 200 requests would take 20 s at one per round.
  const absl::Time start = absl::Now();
  std::vector<std::thread> adders;
  for (int t = 0; t < 4; ++t) {
    adders.emplace_back([&] {
      for (int i = 0; i < 50; ++i) EXPECT_TRUE(client.Add("shared", 1).ok());
    });
  }
  for (auto& t : adders) t.join();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  ASSERT_TRUE(client.Set("handoff", "done").ok());
  waiter.join();
  EXPECT_EQ(*client.Add("shared", 0), 200);
}

TEST_F(TcpStoreTest, WrongTokenIsPermissionDenied) {
  const absl::Time start = absl::Now();
  auto client = Connect("not-the-token");
  EXPECT_EQ(client.status().code(), absl::StatusCode::kPermissionDenied) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), Where())) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "WEFT_TOKEN")) << client.status();
  EXPECT_LT(absl::Now() - start,
            Scaled(absl::Seconds(2)));  // refused, not retried until the deadline

  // On the wire: an 'E' reply, then the server closes.
  const int fd = DialLoopback(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendRaw(fd, HelloFrame("0123456789abcdef0123456789abcdeX")));
  std::string reply;
  EXPECT_NE(AwaitClose(fd, absl::Now() + Scaled(absl::Seconds(2)), &reply), absl::InfiniteFuture());
  ASSERT_GT(reply.size(), 5u);
  EXPECT_EQ(reply[4], 'E');
  close(fd);

  auto good = Connect();
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST_F(TcpStoreTest, HostileConnectionsDoNotDisturbALegitimateClient) {
  const absl::Time opened = absl::Now();
  const int silent = DialLoopback(port_);
  const int garbage = DialLoopback(port_);
  const int oversized = DialLoopback(port_);
  const int truncated = DialLoopback(port_);
  const int authed_oversized = DialLoopback(port_);
  const int authed_unknown = DialLoopback(port_);
  const int authed_malformed = DialLoopback(port_);
  for (int fd : {silent, garbage, oversized, truncated, authed_oversized, authed_unknown,
                 authed_malformed}) {
    ASSERT_GE(fd, 0);
  }
  std::mt19937 random(42);
  std::string noise(1000, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  ASSERT_TRUE(SendRaw(garbage, noise));
  ASSERT_TRUE(SendRaw(oversized, absl::string_view("\xf0\xff\xff\xffH", 5)));
  ASSERT_TRUE(SendRaw(truncated, HelloFrame(kToken).substr(0, 14)));
  for (int fd : {authed_oversized, authed_unknown, authed_malformed}) {
    ASSERT_TRUE(SendRaw(fd, HelloFrame(kToken)));
    char ok[5];
    ASSERT_EQ(recv(fd, ok, sizeof(ok), MSG_WAITALL), 5);
    ASSERT_EQ(ok[4], 'O');
  }
  const uint32_t too_big = kMaxFrameBytes + 1;
  ASSERT_TRUE(SendRaw(authed_oversized, std::string(reinterpret_cast<const char*>(&too_big), 4)));
  ASSERT_TRUE(SendRaw(authed_unknown, Frame("Zzz")));
  ASSERT_TRUE(SendRaw(authed_malformed, Frame(absl::string_view("S\xe8\x03\x00\x00"
                                                                "ab",
                                                                7))));

  // Bounds of an unloaded build; a sanitizer build runs everything several times slower.
  const int scale = testing::TimeScale();
  const pid_t legit = Spawn([&]() -> int {
    const absl::Time start = absl::Now();
    auto client =
        TcpStoreClient::Connect("127.0.0.1", port_, kToken, Deadline::In(absl::Seconds(5) * scale));
    CHILD_CHECK(client.ok(), client.status().ToString());
    for (int i = 0; i < 100; ++i) {
      const std::string key = absl::StrCat("legit/", i);
      CHILD_CHECK((*client)->Set(key, key).ok(), "set ", i);
      absl::StatusOr<std::string> value =
          (*client)->Get(key, Deadline::In(absl::Seconds(2) * scale));
      CHILD_CHECK(value.ok() && *value == key, "get ", i);
      CHILD_CHECK((*client)->Add("legit/count", 1).ok(), "add ", i);
    }
    CHILD_CHECK(absl::Now() - start < absl::Seconds(3) * scale, "took ",
                absl::FormatDuration(absl::Now() - start));
    return 0;
  });

  // Refused at once, each with a reason before the close.
  for (int fd : {oversized, authed_oversized, authed_unknown, authed_malformed}) {
    std::string reply;
    EXPECT_NE(AwaitClose(fd, absl::Now() + Scaled(absl::Seconds(2)), &reply),
              absl::InfiniteFuture());
    ASSERT_GT(reply.size(), 4u);
    EXPECT_EQ(reply[4], 'E') << reply.substr(5);
  }
  EXPECT_EQ(Join(legit, absl::Seconds(6) * scale), 0);

  // Peers that never complete a hello are dropped at the handshake timeout, not before.
  const absl::Time limit = opened + kStoreHandshakeTimeout + Scaled(absl::Seconds(3));
  EXPECT_NE(AwaitClose(garbage, limit), absl::InfiniteFuture());
  for (int fd : {silent, truncated}) {
    const absl::Time closed = AwaitClose(fd, limit);
    ASSERT_NE(closed, absl::InfiniteFuture());
    EXPECT_GE(closed - opened, kStoreHandshakeTimeout - absl::Milliseconds(100));
  }
  for (int fd : {silent, garbage, oversized, truncated, authed_oversized, authed_unknown,
                 authed_malformed}) {
    close(fd);
  }

  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(*(*client)->Get("legit/count", Deadline::In(Scaled(absl::Seconds(1)))), "100");
}

TEST_F(TcpStoreTest, LargeValuesRoundTripAndOversizedOnesAreRefused) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 13));
  ASSERT_TRUE((*client)->Set("big", big).ok());
  absl::StatusOr<std::string> back = (*client)->Get("big", Deadline::In(Scaled(absl::Seconds(5))));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == big);

  const std::string too_big(kMaxFrameBytes, 'x');
  absl::Status refused = (*client)->Set("huge", too_big);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE((*client)->Set("small", "ok").ok());
}

TEST(TcpStoreConnectTest, RetriesUntilTheServerStarts) {
  int port = 0;
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0, kToken);
    ASSERT_TRUE(probe.ok()) << probe.status();
    port = (*probe)->port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    auto started = TcpStoreServer::Start("127.0.0.1", port, kToken);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) server = *std::move(started);
  });
  auto client =
      TcpStoreClient::Connect("127.0.0.1", port, kToken, Deadline::In(Scaled(absl::Seconds(5))));
  starter.join();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(*(*client)->Get("k", Deadline::In(Scaled(absl::Seconds(1)))), "v");
}

TEST(TcpStoreConnectTest, GivesUpAtTheDeadlineNamingTheAddress) {
  int port = 0;
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0, kToken);
    ASSERT_TRUE(probe.ok()) << probe.status();
    port = (*probe)->port();
  }
  const absl::Time start = absl::Now();
  auto client =
      TcpStoreClient::Connect("127.0.0.1", port, kToken, Deadline::In(absl::Milliseconds(300)));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), absl::StrCat("127.0.0.1:", port)))
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "refused")) << client.status();
  EXPECT_GE(waited, absl::Milliseconds(290));
  EXPECT_LT(waited, Scaled(absl::Seconds(2)));

  std::atomic<bool> aborted{true};
  EXPECT_EQ(TcpStoreClient::Connect("127.0.0.1", port, kToken,
                                    Deadline::In(Scaled(absl::Seconds(5)), &aborted))
                .status()
                .code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(TcpStoreClient::Connect("", port, kToken, Deadline::In(Scaled(absl::Seconds(1))))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreClient::Connect("127.0.0.1", 0, kToken, Deadline::In(Scaled(absl::Seconds(1))))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreClient::Connect("127.0.0.1", port, "", Deadline::In(Scaled(absl::Seconds(1))))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpStoreServerTest, RefusesAnEmptyTokenAndABusyPort) {
  EXPECT_EQ(TcpStoreServer::Start("127.0.0.1", 0, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = TcpStoreServer::Start("127.0.0.1", 0, kToken);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = TcpStoreServer::Start("127.0.0.1", (*first)->port(), kToken);
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(absl::StrContains(second.status().message(), "Address already in use"))
      << second.status();
}

TEST(TcpStoreServerTest, DestructionIsBoundedAndClientsSeeTheStoreGo) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, kToken);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const int silent = DialLoopback(port);
  ASSERT_GE(silent, 0);
  auto client =
      TcpStoreClient::Connect("127.0.0.1", port, kToken, Deadline::In(Scaled(absl::Seconds(5))));
  ASSERT_TRUE(client.ok()) << client.status();

  absl::Status waiting;
  absl::Time returned;
  std::thread waiter([&] {
    waiting = (*client)->Get("never", Deadline::In(Scaled(absl::Seconds(10)))).status();
    returned = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  server->reset();
  const absl::Time destroyed = absl::Now();
  waiter.join();
  EXPECT_LT(destroyed - start, Scaled(absl::Seconds(1)));
  EXPECT_LT(returned - destroyed, Scaled(absl::Seconds(1)));
  EXPECT_EQ(waiting.code(), absl::StatusCode::kUnavailable) << waiting;
  EXPECT_TRUE(absl::StrContains(waiting.message(), absl::StrCat("127.0.0.1:", port))) << waiting;
  absl::Status after = (*client)->Set("k", "v");
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  close(silent);
}

}  // namespace
}  // namespace weft
