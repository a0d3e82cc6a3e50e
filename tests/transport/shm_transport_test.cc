// The shared-memory transport and arena between real processes: every test forks its ranks, which
// meet through a FileStore in a fresh directory and talk through real /dev/shm objects.
//
// Children report through their exit status (and print why they failed); each arms alarm() so a
// hang becomes a failed test instead of a stuck run. After every test no /dev/shm object of the
// test's communicator may remain.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backoff.h"
#include "deadline.h"
#include "file_store.h"
#include "gtest/gtest.h"
#include "op_kind.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "transport/link.h"
#include "transport/shm/arena.h"
#include "transport/shm/ring.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/streaming_copy.h"

namespace weft {
namespace {

using ::weft::testing::Scaled;
using ::weft::testing::TempDir;
using ::weft::testing::TimeScale;

constexpr int kChildAlarmSeconds = 20;
constexpr size_t kLarge = size_t{64} << 20;

// ---- Process harness --------------------------------------------------------------------------

std::string NewUniqueName(absl::string_view test) {
  static int counter = 0;
  return absl::StrCat("shmtest-", getpid(), "-", counter++, "-", test);
}

// The /dev/shm entries that belong to the communicator `unique_name`.
std::vector<std::string> LeftoverShmObjects(const std::string& unique_name) {
  const std::string prefix = ShmObjectName(unique_name, "").substr(1);  // without the '/'
  std::vector<std::string> found;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      if (absl::StartsWith(entry->d_name, prefix)) found.push_back(entry->d_name);
    }
    closedir(dir);
  }
  return found;
}

// Once every rank is connected (or has its arena), the names must already be gone while the
// memory is still in use: that is what keeps a later crash from leaking.
absl::Status NamesGoneOnceAllConnected(Store& store, const std::string& unique_name, int rank,
                                       int size) {
  if (absl::Status s =
          StoreBarrier(store, "connected", rank, size, Deadline::In(Scaled(absl::Seconds(10))));
      !s.ok()) {
    return s;
  }
  const std::vector<std::string> left = LeftoverShmObjects(unique_name);
  if (!left.empty()) {
    return absl::InternalError(absl::StrCat("/dev/shm still holds ", left.front(), " and ",
                                            left.size() - 1, " more after everyone connected"));
  }
  return absl::OkStatus();
}

struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
};

// Forks `n` ranks that each run `body(rank, store)` and exit 0 on OkStatus. Returns when all have
// ended (each is bounded by its alarm).
std::vector<ChildResult> RunRanks(int n, const std::function<absl::Status(int, Store&)>& body) {
  TempDir dir;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(kChildAlarmSeconds * TimeScale());
      FileStore store(dir.path());
      const absl::Status status = body(rank, store);
      if (!status.ok()) fprintf(stderr, "rank %d failed: %s\n", rank, status.ToString().c_str());
      fflush(stderr);
      _exit(status.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  std::vector<ChildResult> results(n);
  for (int rank = 0; rank < n; ++rank) {
    int wstatus = 0;
    waitpid(pids[rank], &wstatus, 0);
    if (WIFEXITED(wstatus)) results[rank].exit_code = WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) results[rank].signal = WTERMSIG(wstatus);
  }
  return results;
}

void ExpectAllSucceeded(const std::vector<ChildResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].exit_code, 0)
        << "rank " << rank << " failed (signal " << results[rank].signal << ")";
  }
}

// ---- Link helpers -----------------------------------------------------------------------------

struct Job {
  std::string unique_name;
  std::string token = "job-secret";
  bool cma = true;
};

ConnectContext ContextFor(const Job& job, Store& store, int rank, int size) {
  ConnectContext context;
  context.store = &store;
  context.rank = rank;
  context.size = size;
  context.host_ids.assign(size, "this-host");
  context.token = job.token;
  context.unique_name = job.unique_name;
  context.deadline = Deadline::In(Scaled(absl::Seconds(10)));
  return context;
}

// Connects `rank` to every other rank; returns links indexed by peer (null for itself).
absl::StatusOr<std::vector<std::unique_ptr<Link>>> ConnectMesh(const Job& job, Store& store,
                                                               int rank, int size) {
  setenv("WEFT_SHM_CMA", job.cma ? "1" : "0", 1);
  std::vector<int> peers;
  for (int r = 0; r < size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeShmTransport()->Connect(ContextFor(job, store, rank, size), peers);
  if (!links.ok()) return links.status();
  std::vector<std::unique_ptr<Link>> by_peer(size);
  for (size_t i = 0; i < peers.size(); ++i) {
    if ((*links)[i]->peer() != peers[i] || (*links)[i]->transport_name() != "shm") {
      return absl::InternalError("link does not name its peer or transport");
    }
    by_peer[peers[i]] = std::move((*links)[i]);
  }
  return by_peer;
}

// Progresses `links` until `done()` holds.
absl::Status Drive(const std::vector<Link*>& links, const std::function<bool()>& done,
                   const Deadline& deadline = Deadline::In(Scaled(absl::Seconds(10)))) {
  Backoff backoff;
  while (!done()) {
    bool moved = false;
    for (Link* link : links) {
      absl::StatusOr<bool> progress = link->Progress();
      if (!progress.ok()) return progress.status();
      moved = moved || *progress;
    }
    if (moved) {
      backoff.Reset();
      continue;
    }
    if (absl::Status s = deadline.Check("test drive"); !s.ok()) return s;
    backoff.Pause();
  }
  return absl::OkStatus();
}

std::vector<Link*> Raw(const std::vector<std::unique_ptr<Link>>& links) {
  std::vector<Link*> raw;
  for (const auto& link : links) {
    if (link != nullptr) raw.push_back(link.get());
  }
  return raw;
}

Envelope SendEnvelope(uint64_t seq, size_t bytes) {
  Envelope envelope;
  envelope.seq = seq;
  envelope.count = bytes;
  envelope.kind = static_cast<uint16_t>(OpKind::kSend);
  envelope.dtype = static_cast<uint8_t>(DataType::kUint8);
  return envelope;
}

// Scrambles x (a 64-bit finaliser): values with both signs and no pattern a kernel could fake.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Word i of the stream `seed`: distinct for every position and seed, and cheap enough that
// filling and checking 64 MiB stays fast under sanitizers.
uint64_t WordAt(uint64_t seed, size_t i) {
  return (seed << 40) ^ (i * 0x9e3779b97f4a7c15ull) ^ seed;
}

void Fill(std::vector<uint8_t>& buffer, uint64_t seed) {
  for (size_t i = 0; i < buffer.size(); i += 8) {
    const uint64_t word = WordAt(seed, i / 8);
    std::memcpy(buffer.data() + i, &word, std::min<size_t>(8, buffer.size() - i));
  }
}

absl::Status Check(const std::vector<uint8_t>& buffer, uint64_t seed, absl::string_view what) {
  for (size_t i = 0; i < buffer.size(); i += 8) {
    const uint64_t word = WordAt(seed, i / 8);
    if (std::memcmp(buffer.data() + i, &word, std::min<size_t>(8, buffer.size() - i)) != 0) {
      return absl::DataLossError(
          absl::StrCat(what, ": bytes ", i, "..", i + 7, " of ", buffer.size(), " are wrong"));
    }
  }
  return absl::OkStatus();
}

uint64_t SeedOf(int from, int to, int message) { return from * 1000003 + to * 1009 + message; }

// Every rank sends every message size to every peer while receiving the same from all of them,
// all posted at once, then checks every byte.
absl::Status ExchangeMesh(const Job& job, Store& store, int rank, int size,
                          const std::vector<size_t>& sizes) {
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(job, store, rank, size);
  if (!links.ok()) return links.status();
  if (absl::Status s = NamesGoneOnceAllConnected(store, job.unique_name, rank, size); !s.ok()) {
    return s;
  }
  std::map<std::pair<int, int>, std::vector<uint8_t>> out, in;
  std::vector<std::pair<Link*, uint64_t>> sends, recvs;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    Link* link = (*links)[peer].get();
    for (int m = 0; m < static_cast<int>(sizes.size()); ++m) {
      std::vector<uint8_t>& data = out[{peer, m}];
      data.resize(sizes[m]);
      Fill(data, SeedOf(rank, peer, m));
      sends.emplace_back(link, link->PostSend(SendEnvelope(m, sizes[m]), data.data(), sizes[m]));
      std::vector<uint8_t>& into = in[{peer, m}];
      into.assign(sizes[m], 0xEE);
      recvs.emplace_back(
          link, link->PostRecv(SendEnvelope(m, sizes[m]), RecvSink::Copy(into.data()), sizes[m]));
    }
  }
  absl::Status status = Drive(Raw(*links), [&] {
    return std::all_of(sends.begin(), sends.end(),
                       [](auto& s) { return s.first->SendDone(s.second); }) &&
           std::all_of(recvs.begin(), recvs.end(),
                       [](auto& r) { return r.first->RecvDone(r.second); });
  });
  if (!status.ok()) return status;
  for (auto& [key, data] : in) {
    const auto [peer, m] = key;
    if (absl::Status s =
            Check(data, SeedOf(peer, rank, m), absl::StrCat("message ", m, " from rank ", peer));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

const std::vector<size_t> kMeshSizes = {
    0, 1, 8, 4099, shm::kFirstSlotPayload, shm::kFirstSlotPayload + 1, 300 << 10,
    // Longer than the whole FIFO, and long enough to travel by address when that is allowed.
    shm::kSlotBytes* shm::kSlotCount * 3 + 5};

void RunMesh(int size, bool cma, const std::vector<size_t>& sizes) {
  Job job{NewUniqueName(absl::StrCat("mesh", size)), "job-secret", cma};
  ExpectAllSucceeded(RunRanks(
      size, [&](int rank, Store& store) { return ExchangeMesh(job, store, rank, size, sizes); }));
  EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
}

// ---- Link tests -------------------------------------------------------------------------------

TEST(ShmTransport, TwoRanksAllSizes) { RunMesh(2, /*cma=*/true, kMeshSizes); }
TEST(ShmTransport, ThreeRanksThroughSlotsOnly) { RunMesh(3, /*cma=*/false, kMeshSizes); }
TEST(ShmTransport, FourRanks) { RunMesh(4, /*cma=*/true, kMeshSizes); }
TEST(ShmTransport, EightRanksOversubscribed) {
  RunMesh(8, /*cma=*/false, {0, 8, shm::kFirstSlotPayload + 64, 2 << 20});
}

TEST(ShmTransport, ObjectNamesAreSafeForAnyUniqueName) {
  const std::string name = ShmObjectName(std::string(300, '/') + "odd name:1", "ring.1-0");
  EXPECT_EQ(name.find('/', 1), std::string::npos);
  EXPECT_EQ(name.find(' '), std::string::npos);
  EXPECT_LT(name.size(), 128u);
  EXPECT_NE(ShmObjectName("a/b", "x"), ShmObjectName("a_b", "x"));
  RunMesh(2, /*cma=*/true, {3});  // a unique name with characters /dev/shm cannot take
}

// 64 MiB each way at once, through the slots and, where the kernel allows it, by address.
void RunLarge(bool cma) { RunMesh(2, cma, {kLarge}); }
TEST(ShmTransport, LargeBothDirectionsThroughSlots) { RunLarge(false); }
TEST(ShmTransport, LargeBothDirectionsByAddress) { RunLarge(true); }

// Rank 1 sends its values; rank 0 combines them with its own through the receive-reduce sink:
// in place, or (`from_base`) into a separate output, leaving its values as they were.
template <typename T>
absl::Status ReduceRanks(const Job& job, Store& store, int rank, size_t count, DataType type,
                         ReduceOp op, const std::function<T(int, size_t)>& value,
                         const std::function<T(T, T)>& combine, bool from_base) {
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(job, store, rank, 2);
  if (!links.ok()) return links.status();
  Link* link = (*links)[1 - rank].get();
  std::vector<T> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = value(rank, i);
  Envelope envelope;
  envelope.kind = static_cast<uint16_t>(OpKind::kReduce);
  envelope.count = count;
  envelope.dtype = static_cast<uint8_t>(type);
  envelope.op = static_cast<uint8_t>(op);
  const size_t bytes = count * sizeof(T);
  if (rank == 1) {
    const uint64_t id = link->PostSend(envelope, mine.data(), bytes);
    return Drive({link}, [&] { return link->SendDone(id); });
  }
  std::vector<T> out(from_base ? count : 0);
  const RecvSink sink = from_base ? RecvSink::Reduce(out.data(), type, op, mine.data())
                                  : RecvSink::Reduce(mine.data(), type, op);
  const uint64_t id = link->PostRecv(envelope, sink, bytes);
  if (absl::Status s = Drive({link}, [&] { return link->RecvDone(id); }); !s.ok()) return s;
  const T* got = from_base ? out.data() : mine.data();
  for (size_t i = 0; i < count; ++i) {
    const T expected = combine(value(0, i), value(1, i));
    const T kept = value(0, i);
    if (std::memcmp(&got[i], &expected, sizeof(T)) != 0 ||
        (from_base && std::memcmp(&mine[i], &kept, sizeof(T)) != 0)) {
      return absl::DataLossError(absl::StrCat("element ", i, " of ", count, " is wrong"));
    }
  }
  return absl::OkStatus();
}

void RunReduces(bool cma) {
  // Sizes chosen to end inside a slot, span several, and exceed the FIFO (by address when
  // allowed). Float values are integers well inside 2^24, so the sums are exact.
  for (size_t count : {size_t{1}, size_t{33000}, size_t{1} << 20}) {
    Job job{NewUniqueName("reduce"), "job-secret", cma};
    ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) {
      absl::Status s = ReduceRanks<float>(
          job, store, rank, count, DataType::kFloat32, ReduceOp::kSum,
          [](int r, size_t i) { return static_cast<float>((i * 7 + r * 13) % 100003) - 5000.0f; },
          [](float a, float b) { return a + b; }, /*from_base=*/false);
      if (!s.ok()) return s;
      Job job2{job.unique_name + "-min", job.token, cma};
      return ReduceRanks<int64_t>(
          job2, store, rank, count, DataType::kInt64, ReduceOp::kMin,
          [](int r, size_t i) { return static_cast<int64_t>(Mix(i * 2 + r)) >> (r == 0 ? 1 : 0); },
          [](int64_t a, int64_t b) { return std::min(a, b); }, /*from_base=*/true);
    }));
    EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
  }
}
TEST(ShmTransport, ReduceSinkThroughSlots) { RunReduces(false); }
TEST(ShmTransport, ReduceSinkByAddress) { RunReduces(true); }

TEST(ShmTransport, EnvelopeMismatchNamesBothOperations) {
  for (bool bytes_differ : {false, true}) {
    Job job{NewUniqueName("mismatch")};
    ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) -> absl::Status {
      absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(job, store, rank, 2);
      if (!links.ok()) return links.status();
      Link* link = (*links)[1 - rank].get();
      uint64_t payload[2] = {1, 2};
      if (rank == 0) {
        const uint64_t id = link->PostSend(SendEnvelope(7, 8), payload, 8);
        return Drive({link}, [&] { return link->SendDone(id); });
      }
      const Envelope expected = SendEnvelope(bytes_differ ? 7 : 8, 8);
      const size_t expected_bytes = bytes_differ ? 16 : 8;
      link->PostRecv(expected, RecvSink::Copy(payload), expected_bytes);
      const absl::Status status = Drive({link}, [] { return false; });
      const std::string text(status.message());
      const std::string want = bytes_differ ? "(16 bytes) but the peer sent" : "#8";
      if (status.code() != absl::StatusCode::kFailedPrecondition ||
          !absl::StrContains(text, "rank 1: shared-memory link with rank 0") ||
          !absl::StrContains(text, "mismatched operation") || !absl::StrContains(text, want) ||
          !absl::StrContains(text, "send message #7")) {
        return absl::InternalError(absl::StrCat("unexpected error: ", status.ToString()));
      }
      // The error is final.
      absl::StatusOr<bool> again = link->Progress();
      if (again.ok() || again.status() != status) {
        return absl::InternalError("the link recovered from a mismatch");
      }
      return absl::OkStatus();
    }));
    EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
  }
}

// One rank dies (SIGKILL) in the middle of a transfer; the survivor must say so within about a
// second instead of waiting for its 10-second deadline. Covers a dead sender and a dead receiver.
TEST(ShmTransport, KilledPeerIsReportedPromptly) {
  for (int victim : {0, 1}) {
    Job job{NewUniqueName("killed"), "job-secret", /*cma=*/false};
    std::vector<ChildResult> results = RunRanks(2, [&](int rank, Store& store) -> absl::Status {
      absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(job, store, rank, 2);
      if (!links.ok()) return links.status();
      Link* link = (*links)[1 - rank].get();
      std::vector<uint8_t> buffer(8 << 20, 1);
      const bool sender = rank == 1;
      const uint64_t id =
          sender ? link->PostSend(SendEnvelope(0, buffer.size()), buffer.data(), buffer.size())
                 : link->PostRecv(SendEnvelope(0, buffer.size()), RecvSink::Copy(buffer.data()),
                                  buffer.size());
      if (rank == victim) {
        // Move some data first, so the survivor is mid-message when this rank dies.
        for (int i = 0; i < 100; ++i) {
          if (absl::StatusOr<bool> moved = link->Progress(); moved.ok() && *moved) break;
          usleep(1000);
        }
        raise(SIGKILL);
      }
      const absl::Time start = absl::Now();
      absl::Status status =
          Drive({link}, [&] { return sender ? link->SendDone(id) : link->RecvDone(id); });
      const absl::Duration took = absl::Now() - start;
      const std::string want = absl::StrCat("rank ", victim, " (pid ");
      if (status.code() != absl::StatusCode::kUnavailable ||
          !absl::StrContains(status.message(), want) ||
          !absl::StrContains(status.message(), "exited")) {
        return absl::InternalError(absl::StrCat("unexpected outcome: ", status.ToString()));
      }
      if (took > Scaled(absl::Seconds(2))) {
        return absl::InternalError(
            absl::StrCat("the death took ", absl::FormatDuration(took), " to notice"));
      }
      return absl::OkStatus();
    });
    EXPECT_EQ(results[victim].signal, SIGKILL);
    EXPECT_EQ(results[1 - victim].exit_code, 0);
    EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
  }
}

// A peer that destroys its link (its communicator went away) while this rank still waits.
TEST(ShmTransport, ClosedPeerIsReported) {
  Job job{NewUniqueName("closed")};
  ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) -> absl::Status {
    absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(job, store, rank, 2);
    if (!links.ok()) return links.status();
    Link* link = (*links)[1 - rank].get();
    uint64_t value = 0;
    if (rank == 1) {
      // Send one message, then go away without sending the second.
      const uint64_t id = link->PostSend(SendEnvelope(0, 8), &value, 8);
      if (absl::Status s = Drive({link}, [&] { return link->SendDone(id); }); !s.ok()) return s;
      links->clear();
      return StoreBarrier(store, "closed", rank, 2, Deadline::In(Scaled(absl::Seconds(10))));
    }
    const uint64_t first = link->PostRecv(SendEnvelope(0, 8), RecvSink::Copy(&value), 8);
    const uint64_t second = link->PostRecv(SendEnvelope(1, 8), RecvSink::Copy(&value), 8);
    absl::Status status = Drive({link}, [&] { return link->RecvDone(second); });
    if (!link->RecvDone(first) || status.code() != absl::StatusCode::kUnavailable ||
        !absl::StrContains(status.message(), "rank 1 closed its end")) {
      return absl::InternalError(absl::StrCat("unexpected outcome: ", status.ToString()));
    }
    return StoreBarrier(store, "closed", rank, 2, Deadline::In(Scaled(absl::Seconds(10))));
  }));
}

TEST(ShmTransport, ForeignTokenIsRejected) {
  Job job{NewUniqueName("token")};
  ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) -> absl::Status {
    Job mine = job;
    if (rank == 1) mine.token = "another-job";
    absl::StatusOr<std::vector<std::unique_ptr<Link>>> links = ConnectMesh(mine, store, rank, 2);
    // Each rank checks the ring the other created, so each may notice first.
    if (links.ok() || (!absl::StrContains(links.status().message(), "belongs to a different job") &&
                       !absl::StrContains(links.status().message(), "failed to attach"))) {
      return absl::InternalError(absl::StrCat("unexpected outcome: ", links.status().ToString()));
    }
    return absl::OkStatus();
  }));
  EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
}

// A peer that never joins: Connect fails at its deadline, naming the peer, and removes its rings.
TEST(ShmTransport, MissingPeerTimesOutAndCleansUp) {
  Job job{NewUniqueName("missing")};
  TempDir dir;
  FileStore store(dir.path());
  ConnectContext context = ContextFor(job, store, 0, 2);
  context.deadline = Deadline::In(absl::Milliseconds(200));
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> links =
      MakeShmTransport()->Connect(context, {1});
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(links.status().message(), "rank 1")) << links.status();
  EXPECT_TRUE(LeftoverShmObjects(job.unique_name).empty());
}

TEST(ShmTransport, RejectsPeersOnOtherHostsAndBadLists) {
  Job job{NewUniqueName("hosts")};
  TempDir dir;
  FileStore store(dir.path());
  ConnectContext context = ContextFor(job, store, 0, 3);
  context.host_ids[2] = "elsewhere";
  EXPECT_EQ(MakeShmTransport()->Connect(context, {2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeShmTransport()->Connect(context, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeShmTransport()->Connect(context, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<std::unique_ptr<Link>>> none =
      MakeShmTransport()->Connect(context, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(StreamingCopy, MatchesMemcpyForEveryAlignmentAndLength) {
  std::vector<uint8_t> src(4096 + 256), dst(src.size()), want(src.size());
  Fill(src, 42);
  for (size_t offset = 0; offset < 70; offset += 3) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{127},
                         size_t{200}, size_t{4096}}) {
      std::fill(dst.begin(), dst.end(), 0xAB);
      want = dst;
      std::memcpy(want.data() + offset, src.data() + 1, bytes);
      StreamingCopy(dst.data() + offset, src.data() + 1, bytes);
      StreamingCopyDone();
      ASSERT_EQ(dst, want) << "offset " << offset << ", " << bytes << " bytes";
    }
  }
}

// From 1 MiB the copy takes four pages at a time; whatever is left over goes line by line.
TEST(StreamingCopy, LargeCopiesMatchMemcpy) {
  constexpr size_t kMiB = size_t{1} << 20;
  std::vector<uint8_t> src(3 * kMiB + 4096), dst(src.size()), want(src.size());
  Fill(src, 7);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{33}}) {
    for (size_t bytes : {kMiB, kMiB + 16384 + 100, 3 * kMiB + 5}) {
      std::fill(dst.begin(), dst.end(), 0xAB);
      want = dst;
      std::memcpy(want.data() + offset, src.data() + 3, bytes);
      StreamingCopy(dst.data() + offset, src.data() + 3, bytes);
      StreamingCopyDone();
      const auto wrong = std::mismatch(dst.begin(), dst.end(), want.begin());
      ASSERT_EQ(wrong.first, dst.end())
          << "offset " << offset << ", " << bytes << " bytes: first wrong byte at "
          << (wrong.first - dst.begin());
    }
  }
}

// Both destinations get the bytes, whichever way the source is read, at every alignment of the
// streamed one; the kept one is left alone past its end.
TEST(StreamingCopy, KeepingCopiesToBothDestinations) {
  std::vector<uint8_t> src(64 * 1024 + 4096), dst(src.size()), kept(src.size());
  Fill(src, 11);
  for (bool source_in_dram : {false, true}) {
    for (size_t offset : {size_t{0}, size_t{5}, size_t{64}}) {
      for (size_t bytes : {size_t{0}, size_t{40}, size_t{64}, size_t{130}, size_t{4 * 4096},
                           size_t{4 * 4096 + 300}, size_t{64 * 1024 + 7}}) {
        std::fill(dst.begin(), dst.end(), 0xAB);
        std::fill(kept.begin(), kept.end(), 0xCD);
        std::vector<uint8_t> want_dst = dst, want_kept = kept;
        std::memcpy(want_dst.data() + offset, src.data() + 9, bytes);
        std::memcpy(want_kept.data(), src.data() + 9, bytes);
        StreamingCopyKeeping(dst.data() + offset, kept.data(), src.data() + 9, bytes,
                             source_in_dram);
        StreamingCopyDone();
        ASSERT_EQ(dst, want_dst) << "offset " << offset << ", " << bytes << " bytes, dram "
                                 << source_in_dram;
        ASSERT_EQ(kept, want_kept)
            << "offset " << offset << ", " << bytes << " bytes, dram " << source_in_dram;
      }
    }
  }
}

// ---- Arena tests ------------------------------------------------------------------------------

std::vector<int> Range(int n) {
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  return ranks;
}

// Four ranks fill their areas, publish, and check everyone's; then run many barrier rounds, which
// on 2 cores exercises the spin, yield and futex phases and their wakeups.
TEST(ShmArena, PublishAndWaitAcrossFourProcesses) {
  constexpr int kRanks = 4;
  constexpr int kRounds = 300;
  const std::string unique_name = NewUniqueName("arena");
  ExpectAllSucceeded(RunRanks(kRanks, [&](int rank, Store& store) -> absl::Status {
    const Deadline deadline = Deadline::In(Scaled(absl::Seconds(10)));
    absl::StatusOr<std::unique_ptr<ShmArena>> arena =
        ShmArena::Create(store, unique_name, rank, Range(kRanks), 100000, false, deadline);
    if (!arena.ok()) return arena.status();
    if (absl::Status s = NamesGoneOnceAllConnected(store, unique_name, rank, kRanks); !s.ok()) {
      return s;
    }
    ShmArena& a = **arena;
    if (a.local_rank() != rank || a.local_size() != kRanks || a.area_bytes() < 100000 ||
        a.area_bytes() % 4096 != 0 || reinterpret_cast<uintptr_t>(a.area(rank)) % 64 != 0) {
      return absl::InternalError("arena geometry is wrong");
    }
    std::memset(a.area(rank), rank + 1, a.area_bytes());
    a.Publish(0, 1);
    for (int r = 0; r < kRanks; ++r) {
      if (absl::Status s = a.WaitAtLeast(r, 0, 1, deadline); !s.ok()) return s;
      const std::byte* area = a.area(r);
      for (size_t i = 0; i < a.area_bytes(); ++i) {
        if (area[i] != std::byte(r + 1)) return absl::DataLossError("area content is wrong");
      }
    }
    for (uint64_t round = 1; round <= kRounds; ++round) {
      a.Publish(1, round);
      for (int r = 0; r < kRanks; ++r) {
        if (absl::Status s = a.WaitAtLeast(r, 1, round, deadline); !s.ok()) return s;
      }
    }
    for (int r = 0; r < kRanks; ++r) {
      if (a.Read(r, 1) < kRounds) return absl::InternalError("Read lags behind WaitAtLeast");
    }
    // Stay mapped until everyone is done reading.
    return StoreBarrier(store, "done", rank, kRanks, deadline);
  }));
  EXPECT_TRUE(LeftoverShmObjects(unique_name).empty());
}

// A waiter asleep on the futex must wake when another process publishes, not when its sleep
// times out (at most 10 ms later). Rank 1 publishes once rank 0 has surely gone to sleep and
// leaves the time in its area; without a working cross-process wake the median delay would be
// about 5 ms, with one it is tens of microseconds.
TEST(ShmArena, PublishWakesSleepersInOtherProcesses) {
  constexpr int kRounds = 21;
  const std::string unique_name = NewUniqueName("arena-wake");
  ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) -> absl::Status {
    const Deadline deadline = Deadline::In(Scaled(absl::Seconds(10)));
    absl::StatusOr<std::unique_ptr<ShmArena>> arena =
        ShmArena::Create(store, unique_name, rank, {0, 1}, 4096, false, deadline);
    if (!arena.ok()) return arena.status();
    ShmArena& a = **arena;
    auto* published_at = reinterpret_cast<std::atomic<int64_t>*>(a.area(1));
    std::vector<int64_t> delays_us;
    for (uint64_t round = 1; round <= kRounds; ++round) {
      if (rank == 1) {
        absl::SleepFor(absl::Milliseconds(3));
        published_at->store(absl::GetCurrentTimeNanos());
        a.Publish(0, round);
        if (absl::Status s = a.WaitAtLeast(0, 0, round, deadline); !s.ok()) return s;
        continue;
      }
      if (absl::Status s = a.WaitAtLeast(1, 0, round, deadline); !s.ok()) return s;
      delays_us.push_back((absl::GetCurrentTimeNanos() - published_at->load()) / 1000);
      a.Publish(0, round);
    }
    if (rank == 0) {
      std::nth_element(delays_us.begin(), delays_us.begin() + kRounds / 2, delays_us.end());
      if (delays_us[kRounds / 2] > 2500) {
        return absl::InternalError(absl::StrCat("median wake-up delay ", delays_us[kRounds / 2],
                                                " us: Publish does not wake sleepers"));
      }
    }
    return absl::OkStatus();
  }));
  EXPECT_TRUE(LeftoverShmObjects(unique_name).empty());
}

TEST(ShmArena, WaitTimesOutAndAborts) {
  const std::string unique_name = NewUniqueName("arena-solo");
  TempDir dir;
  FileStore store(dir.path());
  absl::StatusOr<std::unique_ptr<ShmArena>> arena = ShmArena::Create(
      store, unique_name, 0, {0}, 1, false, Deadline::In(Scaled(absl::Seconds(5))));
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_TRUE(LeftoverShmObjects(unique_name).empty());
  ShmArena& a = **arena;
  a.Publish(3, 5);
  EXPECT_EQ(a.Read(0, 3), 5u);
  EXPECT_TRUE(a.WaitAtLeast(0, 3, 5, Deadline::In(Scaled(absl::Seconds(1)))).ok());

  absl::Time start = absl::Now();
  absl::Status status = a.WaitAtLeast(0, 3, 6, Deadline::In(absl::Milliseconds(50)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "it is at 5")) << status;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Milliseconds(500)));

  std::atomic<bool> aborted{false};
  start = absl::Now();
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(30));
    aborted.store(true);
  });
  status = a.WaitAtLeast(0, 3, 6, Deadline::In(Scaled(absl::Seconds(5)), &aborted));
  aborter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_LT(absl::Now() - start, Scaled(absl::Milliseconds(500)));

  // A Publish from another thread wakes a sleeping waiter.
  std::thread publisher([&] {
    absl::SleepFor(absl::Milliseconds(30));
    a.Publish(3, 7);
  });
  start = absl::Now();
  EXPECT_TRUE(a.WaitAtLeast(0, 3, 7, Deadline::In(Scaled(absl::Seconds(5)))).ok());
  publisher.join();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Milliseconds(500)));
}

TEST(ShmArena, DeadRankIsReported) {
  const std::string unique_name = NewUniqueName("arena-dead");
  std::vector<ChildResult> results = RunRanks(2, [&](int rank, Store& store) -> absl::Status {
    const Deadline deadline = Deadline::In(Scaled(absl::Seconds(10)));
    absl::StatusOr<std::unique_ptr<ShmArena>> arena =
        ShmArena::Create(store, unique_name, rank, {0, 1}, 4096, false, deadline);
    if (!arena.ok()) return arena.status();
    if (rank == 1) raise(SIGKILL);
    const absl::Time start = absl::Now();
    absl::Status status = (*arena)->WaitAtLeast(1, 0, 1, deadline);
    if (status.code() != absl::StatusCode::kUnavailable ||
        !absl::StrContains(status.message(), "rank 1 (pid") ||
        absl::Now() - start > Scaled(absl::Seconds(2))) {
      return absl::InternalError(absl::StrCat("unexpected outcome: ", status.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(results[0].exit_code, 0);
  EXPECT_EQ(results[1].signal, SIGKILL);
  EXPECT_TRUE(LeftoverShmObjects(unique_name).empty());
}

TEST(ShmArena, DisagreeingSizesFailOnEveryRank) {
  const std::string unique_name = NewUniqueName("arena-sizes");
  ExpectAllSucceeded(RunRanks(2, [&](int rank, Store& store) -> absl::Status {
    absl::StatusOr<std::unique_ptr<ShmArena>> arena =
        ShmArena::Create(store, unique_name, rank, {0, 1}, rank == 0 ? 4096 : 8192, false,
                         Deadline::In(Scaled(absl::Seconds(10))));
    if (arena.ok() || !absl::StrContains(arena.status().message(), "areas")) {
      return absl::InternalError(absl::StrCat("unexpected outcome: ", arena.status().ToString()));
    }
    return absl::OkStatus();
  }));
  EXPECT_TRUE(LeftoverShmObjects(unique_name).empty());
}

}  // namespace
}  // namespace weft
