// The TCP transport across real processes: forked ranks rendezvous through a FileStore in a fresh
// directory, connect a full mesh over real sockets, and exchange small, empty, large, striped and
// reducing messages; and the ways it must fail: mismatched envelopes, peers that die mid-transfer,
// strangers knocking on the listener, interfaces that do not exist, addresses nobody answers.
//
// Each rank is a child process with a hard alarm; it reports a failure through its exit code and
// one line on stderr. The parent only forks, waits (with its own limit) and checks exit codes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backoff.h"
#include "deadline.h"
#include "file_store.h"
#include "gtest/gtest.h"
#include "op_kind.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "transport/link.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/listener_record.h"
#include "transport/tcp/socket.h"

namespace weft {
namespace {

constexpr char kToken[] = "tcp-test-token-0123456789";
constexpr char kHost[] = "testhost";
constexpr unsigned kChildAlarmSeconds = 12;
constexpr absl::Duration kConnectTimeout = absl::Seconds(8);
constexpr absl::Duration kWorkTimeout = absl::Seconds(8);

using ::weft::testing::Scaled;
using ::weft::testing::TempDir;
using ::weft::testing::TimeScale;

// What one rank sees: its store, and its links indexed by peer rank (null for itself).
struct RankContext {
  int rank = 0;
  int size = 0;
  FileStore* store = nullptr;
  std::vector<std::unique_ptr<Link>> links;
  Link& to(int peer) { return *links[peer]; }
};

struct Transfer {
  Link* link;
  uint64_t id;
  bool is_send;
};

// Drives every link until all `transfers` are done; the first link error ends it.
absl::Status Drive(RankContext& ctx, const std::vector<Transfer>& transfers,
                   absl::Duration timeout = Scaled(kWorkTimeout)) {
  const Deadline deadline = Deadline::In(timeout);
  Backoff backoff;
  std::vector<pollfd> fds;
  while (true) {
    bool moved = false;
    for (auto& link : ctx.links) {
      if (link == nullptr) continue;
      absl::StatusOr<bool> m = link->Progress();
      if (!m.ok()) return m.status();
      moved = moved || *m;
    }
    bool done = true;
    for (const Transfer& t : transfers) {
      done = done && (t.is_send ? t.link->SendDone(t.id) : t.link->RecvDone(t.id));
    }
    if (done) return absl::OkStatus();
    if (absl::Status s = deadline.Check(absl::StrCat("rank ", ctx.rank, " test transfers"));
        !s.ok()) {
      return s;
    }
    if (moved) {
      backoff.Reset();
    } else {
      fds.clear();
      for (auto& link : ctx.links) {
        if (link != nullptr) link->AddPollFds(&fds);
      }
      backoff.Pause(&fds);
    }
  }
}

ConnectContext MakeContext(Store* store, int rank, int size, absl::Duration timeout) {
  ConnectContext context;
  context.store = store;
  context.rank = rank;
  context.size = size;
  context.host_ids.assign(size, kHost);
  context.token = kToken;
  context.unique_name = "tcp-test";
  context.deadline = Deadline::In(timeout);
  return context;
}

absl::StatusOr<RankContext> ConnectAll(FileStore* store, int rank, int size) {
  std::vector<int> peers;
  for (int r = 0; r < size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeTcpTransport()->Connect(MakeContext(store, rank, size, Scaled(kConnectTimeout)), peers);
  if (!links.ok()) return links.status();
  RankContext ctx;
  ctx.rank = rank;
  ctx.size = size;
  ctx.store = store;
  ctx.links.resize(size);
  for (size_t i = 0; i < peers.size(); ++i) {
    if ((*links)[i]->peer() != peers[i] || (*links)[i]->transport_name() != "tcp") {
      return absl::InternalError("Connect returned links out of order");
    }
    ctx.links[peers[i]] = std::move((*links)[i]);
  }
  return ctx;
}

// How each rank runs: environment variables to set, then the body on a connected mesh (or, with
// connect = false, on a bare context, for ranks that call Connect themselves).
struct RankSpec {
  std::vector<std::pair<std::string, std::string>> env;
  bool connect = true;
  std::function<absl::Status(RankContext&)> body;
};

pid_t Fork(const std::function<absl::Status()>& body, const std::string& name) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  alarm(kChildAlarmSeconds * static_cast<unsigned>(TimeScale()));
  const absl::Status status = body();
  if (!status.ok()) {
    const std::string line = absl::StrCat(name, " failed: ", status.ToString(), "\n");
    std::fputs(line.c_str(), stderr);
    _exit(1);
  }
  _exit(0);
}

// Waits for all children; kills them all once `limit` has passed. Returns exit codes (128 +
// signal for a killed child).
std::vector<int> JoinAll(const std::vector<pid_t>& pids, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  std::vector<int> codes(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      --left;
    }
    if (left > 0 && absl::Now() > end) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] == -1) kill(pids[i], SIGKILL);
      }
    }
    if (left > 0) absl::SleepFor(absl::Milliseconds(2));
  }
  return codes;
}

// Forks one process per spec (rank = index) plus any `extra` helper processes, and expects every
// one of them to exit 0.
void RunRanks(const std::vector<RankSpec>& specs,
              const std::vector<std::function<absl::Status(FileStore&)>>& extra = {}) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const int size = static_cast<int>(specs.size());
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    const RankSpec& spec = specs[rank];
    pids.push_back(Fork(
        [&, rank]() -> absl::Status {
          for (const auto& [name, value] : spec.env) setenv(name.c_str(), value.c_str(), 1);
          FileStore store(dir.path());
          if (!spec.connect) {
            RankContext bare{rank, size, &store, {}};
            return spec.body(bare);
          }
          absl::StatusOr<RankContext> ctx = ConnectAll(&store, rank, size);
          if (!ctx.ok()) return ctx.status();
          return spec.body(*ctx);
        },
        absl::StrCat("rank ", rank)));
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    pids.push_back(Fork(
        [&, i]() {
          FileStore store(dir.path());
          return extra[i](store);
        },
        absl::StrCat("helper ", i)));
  }
  const std::vector<int> codes = JoinAll(pids, Scaled(absl::Seconds(kChildAlarmSeconds + 2)));
  for (size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(codes[i], 0) << (i < specs.size() ? "rank " : "helper ")
                           << (i < specs.size() ? i : i - specs.size())
                           << " failed (see its line on stderr)";
  }
}

std::vector<RankSpec> Same(int size, std::function<absl::Status(RankContext&)> body,
                           std::vector<std::pair<std::string, std::string>> env = {}) {
  return std::vector<RankSpec>(size, RankSpec{std::move(env), true, std::move(body)});
}

Envelope MakeEnvelope(uint64_t seq, uint64_t count, uint32_t step = 0, OpKind kind = OpKind::kSend,
                      DataType dtype = DataType::kUint8, ReduceOp op = ReduceOp::kSum) {
  Envelope e;
  e.seq = seq;
  e.count = count;
  e.step = step;
  e.kind = static_cast<uint16_t>(kind);
  e.dtype = static_cast<uint8_t>(dtype);
  e.op = static_cast<uint8_t>(op);
  return e;
}

// A byte pattern that differs by sender, receiver, message and position (8 bytes per hash, so
// filling and checking 64 MiB stays fast).
void FillPattern(std::vector<uint8_t>& buffer, int from, int to, uint64_t message) {
  const uint64_t seed = (uint64_t(from) << 56) ^ (uint64_t(to) << 48) ^ (message << 32);
  for (size_t i = 0; i < buffer.size(); i += 8) {
    uint64_t x = seed ^ (i / 8);
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 32;
    std::memcpy(buffer.data() + i, &x, std::min<size_t>(8, buffer.size() - i));
  }
}

absl::Status CheckPattern(const std::vector<uint8_t>& buffer, int from, int to, uint64_t message) {
  std::vector<uint8_t> expected(buffer.size());
  FillPattern(expected, from, to, message);
  if (buffer == expected) return absl::OkStatus();
  const auto [got, want] = std::mismatch(buffer.begin(), buffer.end(), expected.begin());
  return absl::DataLossError(absl::StrCat("message #", message, " from rank ", from,
                                          " differs at byte ", got - buffer.begin(), " of ",
                                          buffer.size()));
}

// ---------------------------------------------------------------------------------------------
// Traffic on a healthy mesh.

class MeshTest : public ::testing::TestWithParam<int> {};

// Hundreds of small messages (a fifth of them empty) in both directions between every pair, all
// posted up front, receives posted before the sends.
TEST_P(MeshTest, ManySmallAndEmptyMessagesEveryPair) {
  constexpr int kMessages = 300;
  RunRanks(Same(GetParam(), [](RankContext& ctx) -> absl::Status {
    std::vector<std::vector<uint8_t>> out(ctx.size * kMessages), in(ctx.size * kMessages);
    std::vector<Transfer> transfers;
    for (int peer = 0; peer < ctx.size; ++peer) {
      if (peer == ctx.rank) continue;
      for (int i = 0; i < kMessages; ++i) {
        const size_t bytes = i % 5 == 0 ? 0 : (static_cast<size_t>(i) * 37) % 3000 + 1;
        std::vector<uint8_t>& buffer = in[peer * kMessages + i];
        buffer.resize(bytes);
        transfers.push_back(
            {&ctx.to(peer),
             ctx.to(peer).PostRecv(MakeEnvelope(i, bytes),
                                   RecvSink::Copy(bytes ? buffer.data() : nullptr), bytes),
             false});
      }
    }
    for (int peer = 0; peer < ctx.size; ++peer) {
      if (peer == ctx.rank) continue;
      for (int i = 0; i < kMessages; ++i) {
        const size_t bytes = i % 5 == 0 ? 0 : (static_cast<size_t>(i) * 37) % 3000 + 1;
        std::vector<uint8_t>& buffer = out[peer * kMessages + i];
        buffer.resize(bytes);
        FillPattern(buffer, ctx.rank, peer, i);
        const uint64_t id =
            ctx.to(peer).PostSend(MakeEnvelope(i, bytes), bytes ? buffer.data() : nullptr, bytes);
        if (id != static_cast<uint64_t>(i)) return absl::InternalError("send ids must count");
        transfers.push_back({&ctx.to(peer), id, true});
      }
    }
    if (absl::Status s = Drive(ctx, transfers); !s.ok()) return s;
    for (int peer = 0; peer < ctx.size; ++peer) {
      if (peer == ctx.rank) continue;
      for (int i = 0; i < kMessages; ++i) {
        if (absl::Status s = CheckPattern(in[peer * kMessages + i], peer, ctx.rank, i); !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  }));
}

// Every rank sends 8 MiB to its right neighbour while receiving from its left one, three steps
// in a row, as a ring algorithm does.
TEST_P(MeshTest, RingStepsSendAndReceiveAtOnce) {
  RunRanks(Same(GetParam(), [](RankContext& ctx) -> absl::Status {
    const int right = (ctx.rank + 1) % ctx.size;
    const int left = (ctx.rank + ctx.size - 1) % ctx.size;
    std::vector<uint8_t> out(8 << 20), in(8 << 20);
    for (uint32_t step = 0; step < 3; ++step) {
      FillPattern(out, ctx.rank, right, step);
      const Envelope e = MakeEnvelope(7, out.size(), step, OpKind::kAllGather);
      const uint64_t r = ctx.to(left).PostRecv(e, RecvSink::Copy(in.data()), in.size());
      const uint64_t s = ctx.to(right).PostSend(e, out.data(), out.size());
      if (absl::Status st = Drive(ctx, {{&ctx.to(left), r, false}, {&ctx.to(right), s, true}});
          !st.ok()) {
        return st;
      }
      if (absl::Status st = CheckPattern(in, left, ctx.rank, step); !st.ok()) return st;
    }
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, MeshTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return absl::StrCat(info.param, "Ranks"); });

// Large messages byte for byte, both directions at once, with one stream and with four (striped
// in chunks over the streams). The sizes cut the last chunk short and mix a small message in.
class LargeTest : public ::testing::TestWithParam<int> {};

TEST_P(LargeTest, LargeMessagesArriveByteForByte) {
  const std::string nstreams = absl::StrCat(GetParam());
  RunRanks(Same(2,
                [](RankContext& ctx) -> absl::Status {
                  const int peer = 1 - ctx.rank;
                  const std::vector<size_t> sizes = {64 << 20, 1000, (1 << 20) + 7, 300 << 10};
                  std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size());
                  std::vector<Transfer> transfers;
                  for (size_t i = 0; i < sizes.size(); ++i) {
                    out[i].resize(sizes[i]);
                    in[i].resize(sizes[i]);
                    FillPattern(out[i], ctx.rank, peer, i);
                    const Envelope e = MakeEnvelope(i, sizes[i]);
                    transfers.push_back(
                        {&ctx.to(peer),
                         ctx.to(peer).PostRecv(e, RecvSink::Copy(in[i].data()), sizes[i]), false});
                    transfers.push_back(
                        {&ctx.to(peer), ctx.to(peer).PostSend(e, out[i].data(), sizes[i]), true});
                  }
                  if (absl::Status s = Drive(ctx, transfers); !s.ok()) return s;
                  for (size_t i = 0; i < sizes.size(); ++i) {
                    if (absl::Status s = CheckPattern(in[i], peer, ctx.rank, i); !s.ok()) return s;
                  }
                  return absl::OkStatus();
                },
                {{"WEFT_SOCKET_NSTREAMS", nstreams}}));
}

INSTANTIATE_TEST_SUITE_P(Streams, LargeTest, ::testing::Values(1, 4),
                         [](const auto& info) { return absl::StrCat(info.param, "Streams"); });

// The lower rank of a pair decides the pair's stream count, so ranks configured differently
// still agree.
TEST(TcpTransportTest, RanksWithDifferentStreamCountsAgree) {
  auto body = [](RankContext& ctx) -> absl::Status {
    std::vector<std::vector<uint8_t>> out(ctx.size), in(ctx.size);
    std::vector<Transfer> transfers;
    for (int peer = 0; peer < ctx.size; ++peer) {
      if (peer == ctx.rank) continue;
      out[peer].resize(3 << 20);
      in[peer].resize(3 << 20);
      FillPattern(out[peer], ctx.rank, peer, 0);
      const Envelope e = MakeEnvelope(0, 3 << 20);
      transfers.push_back({&ctx.to(peer),
                           ctx.to(peer).PostRecv(e, RecvSink::Copy(in[peer].data()), 3 << 20),
                           false});
      transfers.push_back(
          {&ctx.to(peer), ctx.to(peer).PostSend(e, out[peer].data(), 3 << 20), true});
    }
    if (absl::Status s = Drive(ctx, transfers); !s.ok()) return s;
    for (int peer = 0; peer < ctx.size; ++peer) {
      if (peer == ctx.rank) continue;
      if (absl::Status s = CheckPattern(in[peer], peer, ctx.rank, 0); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  RunRanks({RankSpec{{{"WEFT_SOCKET_NSTREAMS", "3"}}, true, body},
            RankSpec{{{"WEFT_SOCKET_NSTREAMS", "1"}}, true, body},
            RankSpec{{{"WEFT_SOCKET_NSTREAMS", "16"}}, true, body}});
}

// Reducing receives: fp32 sum and int32 max, large (striped, partial elements across reads) and
// small, behind a 3-byte message that leaves the stream's buffer misaligned.
TEST(TcpTransportTest, ReduceSinkCombinesElementwise) {
  RunRanks(Same(2, [](RankContext& ctx) -> absl::Status {
    const int peer = 1 - ctx.rank;
    const size_t floats = (3 << 20) / 4 + 3;
    const size_t ints = 1001;
    auto mine_f = [&](int rank, size_t i) { return static_cast<float>((i * 7 + rank * 3) % 1024); };
    auto mine_i = [&](int rank, size_t i) {
      return static_cast<int32_t>((i * 2654435761u + rank * 97) % 20001) - 10000;
    };
    std::vector<float> send_f(floats), recv_f(floats);
    std::vector<int32_t> send_i(ints), recv_i(ints, -1);
    for (size_t i = 0; i < floats; ++i) send_f[i] = recv_f[i] = mine_f(ctx.rank, i);
    for (size_t i = 0; i < ints; ++i) send_i[i] = mine_i(ctx.rank, i);
    const uint8_t odd_out[3] = {1, 2, 3};
    uint8_t odd_in[3] = {};

    Link& link = ctx.to(peer);
    const Envelope e0 = MakeEnvelope(0, 3);
    const Envelope e1 = MakeEnvelope(1, floats, 0, OpKind::kAllReduce, DataType::kFloat32);
    const Envelope e2 =
        MakeEnvelope(2, ints, 0, OpKind::kAllReduce, DataType::kInt32, ReduceOp::kMax);
    std::vector<Transfer> transfers = {
        {&link, link.PostRecv(e0, RecvSink::Copy(odd_in), 3), false},
        {&link,
         link.PostRecv(e1, RecvSink::Reduce(recv_f.data(), DataType::kFloat32, ReduceOp::kSum),
                       floats * 4),
         false},
        {&link,
         link.PostRecv(e2,
                       RecvSink::Reduce(recv_i.data(), DataType::kInt32, ReduceOp::kMax,
                                        /*base=*/send_i.data()),
                       ints * 4),
         false},
        {&link, link.PostSend(e0, odd_out, 3), true},
        {&link, link.PostSend(e1, send_f.data(), floats * 4), true},
        {&link, link.PostSend(e2, send_i.data(), ints * 4), true},
    };
    if (absl::Status s = Drive(ctx, transfers); !s.ok()) return s;
    if (std::memcmp(odd_in, odd_out, 3) != 0) return absl::DataLossError("3-byte message");
    for (size_t i = 0; i < floats; ++i) {
      if (recv_f[i] != mine_f(0, i) + mine_f(1, i)) {
        return absl::DataLossError(absl::StrCat("fp32 sum wrong at element ", i, ": ", recv_f[i]));
      }
    }
    for (size_t i = 0; i < ints; ++i) {
      if (recv_i[i] != std::max(mine_i(0, i), mine_i(1, i)) || send_i[i] != mine_i(ctx.rank, i)) {
        return absl::DataLossError(absl::StrCat("int32 max from a base wrong at element ", i));
      }
    }
    return absl::OkStatus();
  }));
}

// ---------------------------------------------------------------------------------------------
// Failures.

// A receive that expects another operation fails with both descriptions, and so does one that
// expects another size.
TEST(TcpTransportTest, EnvelopeMismatchNamesBothSides) {
  const Envelope sent = MakeEnvelope(17, 256, 3, OpKind::kAllReduce, DataType::kFloat32);
  const Envelope expected = MakeEnvelope(18, 256, 3, OpKind::kAllReduce, DataType::kFloat32);
  auto body = [&](RankContext& ctx) -> absl::Status {
    std::vector<uint8_t> buffer(1024);
    if (ctx.rank == 0) {
      Link& link = ctx.to(1);
      std::vector<Transfer> sends = {{&link, link.PostSend(sent, buffer.data(), 1024), true}};
      if (absl::Status s = Drive(ctx, sends); !s.ok()) return s;
      return ctx.store->Get("checked", Deadline::In(Scaled(kWorkTimeout))).status();
    }
    Link& link = ctx.to(0);
    absl::Status status =
        Drive(ctx, {{&link, link.PostRecv(expected, RecvSink::Copy(buffer.data()), 1024), false}});
    if (status.code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(status.message(), DescribeEnvelope(sent)) ||
        !absl::StrContains(status.message(), DescribeEnvelope(expected)) ||
        !absl::StrContains(status.message(), "rank 0")) {
      return absl::InternalError(absl::StrCat("unexpected result: ", status.ToString()));
    }
    // The failure is final.
    absl::StatusOr<bool> again = link.Progress();
    if (again.ok()) return absl::InternalError("a failed link kept working");
    return ctx.store->Set("checked", "1");
  };
  RunRanks(Same(2, body));
}

TEST(TcpTransportTest, SizeMismatchNamesBothSizes) {
  auto body = [](RankContext& ctx) -> absl::Status {
    std::vector<uint8_t> buffer(4096);
    const Envelope e = MakeEnvelope(1, 0);
    if (ctx.rank == 0) {
      Link& link = ctx.to(1);
      if (absl::Status s = Drive(ctx, {{&link, link.PostSend(e, buffer.data(), 300), true}});
          !s.ok()) {
        return s;
      }
      return ctx.store->Get("checked", Deadline::In(Scaled(kWorkTimeout))).status();
    }
    Link& link = ctx.to(0);
    absl::Status status =
        Drive(ctx, {{&link, link.PostRecv(e, RecvSink::Copy(buffer.data()), 4096), false}});
    if (!absl::StrContains(status.message(), "(4096 bytes)") ||
        !absl::StrContains(status.message(), "(300 bytes)")) {
      return absl::InternalError(absl::StrCat("unexpected result: ", status.ToString()));
    }
    return ctx.store->Set("checked", "1");
  };
  RunRanks(Same(2, body));
}

// A receiver that dies while a large send is under way: the sender learns within moments
// (connection reset), long before its deadline.
TEST(TcpTransportTest, ReceiverExitMidTransferIsUnavailable) {
  auto body = [](RankContext& ctx) -> absl::Status {
    if (ctx.rank == 1) {
      absl::SleepFor(absl::Milliseconds(200));
      _exit(0);  // with a full receive buffer and nothing read: the kernel resets the connection
    }
    std::vector<uint8_t> big(64 << 20, 1);
    Link& link = ctx.to(1);
    const absl::Time start = absl::Now();
    absl::Status status = Drive(
        ctx, {{&link, link.PostSend(MakeEnvelope(0, big.size()), big.data(), big.size()), true}});
    const absl::Duration took = absl::Now() - start;
    if (status.code() != absl::StatusCode::kUnavailable ||
        !absl::StrContains(status.message(), "connection to rank 1 (") ||
        !absl::StrContains(status.message(), "closed")) {
      return absl::InternalError(absl::StrCat("unexpected result: ", status.ToString()));
    }
    if (took > Scaled(absl::Seconds(2))) {
      return absl::InternalError(absl::StrCat("noticed only after ", absl::FormatDuration(took)));
    }
    return absl::OkStatus();
  };
  RunRanks(Same(2, body));
}

// A sender that dies after putting part of a large message on the wire: the receiver gets what
// was sent, then Unavailable.
TEST(TcpTransportTest, SenderExitMidTransferIsUnavailable) {
  auto body = [](RankContext& ctx) -> absl::Status {
    std::vector<uint8_t> big(64 << 20, 1);
    const Envelope e = MakeEnvelope(0, big.size());
    if (ctx.rank == 1) {
      Link& link = ctx.to(0);
      link.PostSend(e, big.data(), big.size());
      for (int i = 0; i < 3; ++i) {
        if (absl::StatusOr<bool> m = link.Progress(); !m.ok()) return m.status();
      }
      if (link.SendDone(0)) return absl::InternalError("64 MiB went out before anyone read");
      if (absl::Status s = ctx.store->Set("sender-exiting", "1"); !s.ok()) return s;
      _exit(0);
    }
    // Rank 0 reads only once the sender is gone, so the transfer is cut mid-way for sure.
    if (absl::Status s =
            ctx.store->Get("sender-exiting", Deadline::In(Scaled(kWorkTimeout))).status();
        !s.ok()) {
      return s;
    }
    absl::SleepFor(absl::Milliseconds(50));
    Link& link = ctx.to(1);
    const absl::Time start = absl::Now();
    absl::Status status =
        Drive(ctx, {{&link, link.PostRecv(e, RecvSink::Copy(big.data()), big.size()), false}});
    const absl::Duration took = absl::Now() - start;
    if (status.code() != absl::StatusCode::kUnavailable ||
        !absl::StrContains(status.message(), "connection to rank 1 (")) {
      return absl::InternalError(absl::StrCat("unexpected result: ", status.ToString()));
    }
    if (took > Scaled(absl::Seconds(2))) {
      return absl::InternalError(absl::StrCat("noticed only after ", absl::FormatDuration(took)));
    }
    return absl::OkStatus();
  };
  RunRanks(Same(2, body));
}

// A blocking connection to `address` for the stray helper, or -1.
int RawConnect(const tcp::SocketAddress& address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in& sin = address.sockaddr();
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(fd);
    return -1;
  }
  timeval limit{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  return fd;
}

// Strangers reach rank 1's listener before rank 0 connects: one sends garbage, one an absurd
// hello, one a proper hello with the wrong token (and is told so), one connects and stays silent.
// The mesh still forms and carries traffic.
TEST(TcpTransportTest, StrayConnectionsDoNotBreakSetup) {
  auto stray = [](FileStore& store) -> absl::Status {
    absl::StatusOr<std::string> text = store.Get("tcp/addr/1", Deadline::In(Scaled(kWorkTimeout)));
    if (!text.ok()) return text.status();
    absl::StatusOr<tcp::ListenerRecord> record = tcp::ParseListenerRecord(*text);
    if (!record.ok()) return record.status();
    const tcp::SocketAddress& target = record->addresses.front().address;

    const int garbage = RawConnect(target);
    const std::string junk(200, 'A');
    if (garbage < 0 || send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL) < 0) {
      return absl::InternalError("garbage connection failed");
    }
    tcp::Hello claim;
    claim.to_rank = 1;
    std::string absurd = tcp::EncodeHello(claim);
    const uint32_t huge = 1u << 30;
    std::memcpy(absurd.data() + 24, &huge, sizeof(huge));
    const int liar = RawConnect(target);
    if (liar < 0 || send(liar, absurd.data(), absurd.size(), MSG_NOSIGNAL) < 0) {
      return absl::InternalError("absurd-hello connection failed");
    }
    const int silent = RawConnect(target);
    if (silent < 0) return absl::InternalError("silent connection failed");

    const std::string hello = tcp::EncodeHello(tcp::Hello{.from_rank = 0,
                                                          .to_rank = 1,
                                                          .stream = 0,
                                                          .nstreams = 2,
                                                          .token = "not-the-token",
                                                          .unique_name = "tcp-test"});
    const int wrong = RawConnect(target);
    if (wrong < 0 || send(wrong, hello.data(), hello.size(), MSG_NOSIGNAL) < 0) {
      return absl::InternalError("wrong-token connection failed");
    }
    char ack[tcp::kAckBytes];
    if (recv(wrong, ack, sizeof(ack), MSG_WAITALL) != static_cast<ssize_t>(sizeof(ack)) ||
        tcp::DecodeAck(absl::string_view(ack, sizeof(ack))) != tcp::AckCode::kWrongToken) {
      return absl::InternalError("the wrong token was not refused as such");
    }
    if (absl::Status s = store.Set("strays-done", "1"); !s.ok()) return s;
    absl::SleepFor(absl::Milliseconds(500));  // the silent one stays open meanwhile
    close(garbage);
    close(liar);
    close(silent);
    close(wrong);
    return absl::OkStatus();
  };
  auto traffic = [](RankContext& ctx) -> absl::Status {
    const int peer = 1 - ctx.rank;
    std::vector<uint8_t> out(1 << 20), in(1 << 20);
    FillPattern(out, ctx.rank, peer, 0);
    const Envelope e = MakeEnvelope(0, out.size());
    Link& link = ctx.to(peer);
    if (absl::Status s =
            Drive(ctx, {{&link, link.PostRecv(e, RecvSink::Copy(in.data()), in.size()), false},
                        {&link, link.PostSend(e, out.data(), out.size()), true}});
        !s.ok()) {
      return s;
    }
    return CheckPattern(in, peer, ctx.rank, 0);
  };
  RankSpec rank0{
      {}, false, [&](RankContext& bare) -> absl::Status {
        // Connect only after the strays are in rank 1's queue.
        if (absl::Status s =
                bare.store->Get("strays-done", Deadline::In(Scaled(kWorkTimeout))).status();
            !s.ok()) {
          return s;
        }
        absl::StatusOr<RankContext> ctx = ConnectAll(bare.store, 0, 2);
        if (!ctx.ok()) return ctx.status();
        return traffic(*ctx);
      }};
  RankSpec rank1{{}, true, traffic};
  RunRanks({rank0, rank1}, {stray});
}

// A filter that matches nothing fails at once, before publishing anything, and says what exists
// and what to do.
TEST(TcpTransportTest, NoMatchingInterfaceIsActionable) {
  TempDir dir;
  FileStore store(dir.path());
  setenv("WEFT_SOCKET_IFNAME", "nonexistent", 1);
  std::unique_ptr<Transport> transport = MakeTcpTransport();
  unsetenv("WEFT_SOCKET_IFNAME");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      transport->Connect(MakeContext(&store, 0, 2, Scaled(kConnectTimeout)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  const std::string message(links.status().message());
  EXPECT_TRUE(absl::StrContains(message, "WEFT_SOCKET_IFNAME='nonexistent'")) << message;
  EXPECT_TRUE(absl::StrContains(message, "lo 127.0.0.1")) << message;
  EXPECT_TRUE(absl::StrContains(message, "see `ip addr`")) << message;
  EXPECT_TRUE(absl::StrContains(message, "rank 0")) << message;
}

TEST(TcpTransportTest, BadStreamCountIsRejected) {
  TempDir dir;
  FileStore store(dir.path());
  setenv("WEFT_SOCKET_NSTREAMS", "17", 1);
  std::unique_ptr<Transport> transport = MakeTcpTransport();
  unsetenv("WEFT_SOCKET_NSTREAMS");
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      transport->Connect(MakeContext(&store, 0, 2, Scaled(kConnectTimeout)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(links.status().message(), "WEFT_SOCKET_NSTREAMS='17'"));
}

// A port on which nobody listens: bound, never listened on, closed.
int DeadPort() {
  tcp::ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin));
  socklen_t len = sizeof(sin);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  return ntohs(sin.sin_port);
}

// A peer whose published addresses all fail: the error lists each address with its errno text
// (and the loopback address of another host as skipped), and says what to do. It comes at once,
// not at the deadline.
TEST(TcpTransportTest, UnreachablePeerListsEveryAddressTried) {
  TempDir dir;
  FileStore store(dir.path());
  tcp::ListenerRecord fake;
  fake.host_id = kHost;
  for (const char* name : {"eth7", "eth8"}) {
    fake.addresses.push_back({name, *tcp::SocketAddress::Parse("127.0.0.1", DeadPort())});
  }
  ASSERT_TRUE(store.Set("tcp/addr/1", tcp::FormatListenerRecord(fake)).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeTcpTransport()->Connect(MakeContext(&store, 0, 2, Scaled(kConnectTimeout)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  const std::string message(links.status().message());
  for (const tcp::InterfaceAddress& a : fake.addresses) {
    EXPECT_TRUE(absl::StrContains(
        message, absl::StrCat(a.address.ToString(), " (", a.name, "): Connection refused")))
        << message;
  }
  EXPECT_TRUE(absl::StrContains(message, "cannot reach rank 1")) << message;
  EXPECT_TRUE(absl::StrContains(message, "Set WEFT_SOCKET_IFNAME")) << message;

  // The same loopback addresses published from another host are not even tried.
  TempDir other_dir;
  FileStore other(other_dir.path());
  fake.host_id = "elsewhere";
  ASSERT_TRUE(other.Set("tcp/addr/1", tcp::FormatListenerRecord(fake)).ok());
  links = MakeTcpTransport()->Connect(MakeContext(&other, 0, 2, Scaled(kConnectTimeout)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_TRUE(absl::StrContains(links.status().message(),
                                "skipped, a loopback address of "
                                "another host"))
      << links.status().message();
}

// A peer that never shows up ends Connect at the deadline, naming the rank it waited for.
TEST(TcpTransportTest, AbsentPeerEndsAtTheDeadline) {
  TempDir dir;
  FileStore store(dir.path());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeTcpTransport()->Connect(MakeContext(&store, 0, 2, absl::Milliseconds(300)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(links.status().message(), "rank 1")) << links.status().message();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(3)));
}

// A rank whose published listener accepts TCP but never finishes the handshake (here: rank 1
// published and went quiet) is reported at the deadline with what was pending.
TEST(TcpTransportTest, SilentListenerIsNamedAtTheDeadline) {
  TempDir dir;
  FileStore store(dir.path());
  int port = 0;
  absl::StatusOr<tcp::ScopedFd> listener = tcp::OpenListener(&port);
  ASSERT_TRUE(listener.ok());
  tcp::ListenerRecord quiet{kHost, {{"lo", *tcp::SocketAddress::Parse("127.0.0.1", port)}}};
  ASSERT_TRUE(store.Set("tcp/addr/1", tcp::FormatListenerRecord(quiet)).ok());
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeTcpTransport()->Connect(MakeContext(&store, 0, 2, absl::Milliseconds(400)), {1});
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(
      links.status().message(),
      absl::StrCat("rank 1 (stream 0 at 127.0.0.1:", port, " awaits the handshake answer)")))
      << links.status().message();
}

}  // namespace
}  // namespace weft
