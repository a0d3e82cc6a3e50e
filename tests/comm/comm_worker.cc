// One rank of a multi-process communicator test, started by weftrun (or mpirun, or by hand with
// torchrun-style variables) from comm_test.cc. Each suite checks results bit for bit against
// order-independent expectations and exits non-zero after printing every failure.
//
//   comm_worker SUITE [--fake-hosts K | --deny-cma]
//
// --fake-hosts K sets WEFT_HOSTNAME to host<rank % K> before creating the communicator, so one
// machine looks like K hosts and mixed shared-memory/TCP layouts get tested. --deny-cma makes
// process_vm_readv fail with EPERM (a seccomp filter), as ptrace restrictions do.
//
// WEFT_EXPECT_ALGO ("all_reduce=ring,broadcast=tree"): after the suite, every collective of those
// kinds in the flight recorder (size it with WEFT_FLIGHT_RECORDER_SIZE) must have run on that
// algorithm, and at least one of each kind must be there.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bootstrap/environment.h"
#include "comm_state.h"
#include "common/expected_values.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"

namespace weft::testing {
namespace {

int failures = 0;

#define EXPECT_OK(expr)                                                         \
  do {                                                                          \
    absl::Status _s = (expr);                                                   \
    if (!_s.ok()) {                                                             \
      ++failures;                                                               \
      std::fprintf(stderr, "FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, \
                   _s.ToString().c_str());                                      \
    }                                                                           \
  } while (0)

void Fail(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "FAIL %s\n", what.c_str());
}

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                               DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                               DataType::kFloat64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr size_t kSmallCounts[] = {0, 1, 7, 13, 1031};
// Larger than the shared-memory round and the TCP stripe size; prime.
constexpr size_t kLargeCount = 262147;

std::vector<std::byte> Inputs(DataType t, ReduceOp op, int rank, uint64_t first, size_t n) {
  const size_t es = SizeOf(t);
  std::vector<std::byte> data(n * es);
  for (size_t i = 0; i < n; ++i) Store(t, InputValue(t, op, rank, first + i), &data[i * es]);
  return data;
}

// Compares n elements at `got` with the expected reduction of global elements first.. .
void CheckReduced(const std::string& what, DataType t, ReduceOp op, int ranks, uint64_t first,
                  const std::byte* got, size_t n) {
  const size_t es = SizeOf(t);
  std::byte want[8];
  for (size_t i = 0; i < n; ++i) {
    StoreExpected(t, op, ranks, first + i, want);
    if (std::memcmp(want, got + i * es, es) != 0) {
      Fail(absl::StrCat(what, ": element ", i, " differs"));
      return;
    }
  }
}

void CheckCopied(const std::string& what, DataType t, ReduceOp op, int from_rank, uint64_t first,
                 const std::byte* got, size_t n) {
  std::vector<std::byte> want = Inputs(t, op, from_rank, first, n);
  if (n > 0 && std::memcmp(want.data(), got, want.size()) != 0) {
    Fail(absl::StrCat(what, ": data from rank ", from_rank, " differs"));
  }
}

std::string Label(const char* coll, DataType t, ReduceOp op, size_t count, bool in_place) {
  return absl::StrCat(coll, " ", Name(t), " ", Name(op), " count=", count,
                      in_place ? " in-place" : " out-of-place");
}

void TestReductions(Communicator& comm, DataType t, ReduceOp op, size_t count) {
  const int p = comm.size(), r = comm.rank();
  const size_t es = SizeOf(t);
  for (bool in_place : {false, true}) {
    {  // all_reduce
      std::vector<std::byte> send = Inputs(t, op, r, 0, count);
      std::vector<std::byte> recv(count * es);
      void* out = in_place ? send.data() : recv.data();
      const std::string what = Label("all_reduce", t, op, count, in_place);
      EXPECT_OK(comm.AllReduce(send.data(), out, count, t, op).Wait());
      CheckReduced(what, t, op, p, 0, static_cast<std::byte*>(out), count);
    }
    {  // reduce_scatter: global element index = block * count + i
      std::vector<std::byte> send = Inputs(t, op, r, 0, count * p);
      std::vector<std::byte> recv(count * es);
      std::byte* out = in_place ? send.data() + r * count * es : recv.data();
      EXPECT_OK(comm.ReduceScatter(send.data(), out, count, t, op).Wait());
      CheckReduced(Label("reduce_scatter", t, op, count, in_place), t, op, p, r * count, out,
                   count);
    }
    for (int root : {0, p - 1}) {  // reduce
      std::vector<std::byte> send = Inputs(t, op, r, 0, count);
      std::vector<std::byte> recv(count * es, std::byte{0x5a});
      void* out = in_place ? send.data() : recv.data();
      EXPECT_OK(comm.Reduce(send.data(), out, count, t, op, root).Wait());
      const std::string what =
          absl::StrCat(Label("reduce", t, op, count, in_place), " root=", root);
      if (r == root) {
        CheckReduced(what, t, op, p, 0, static_cast<std::byte*>(out), count);
      } else if (!in_place) {
        for (std::byte b : recv) {
          if (b != std::byte{0x5a}) {
            Fail(what + ": non-root receive buffer was written");
            break;
          }
        }
      }
    }
  }
}

void TestDataMovement(Communicator& comm, DataType t, size_t count) {
  const int p = comm.size(), r = comm.rank();
  const size_t es = SizeOf(t);
  const ReduceOp op = ReduceOp::kMax;  // selects the wide-range input values
  for (bool in_place : {false, true}) {
    {  // all_gather
      std::vector<std::byte> recv(count * p * es);
      std::vector<std::byte> send = Inputs(t, op, r, 0, count);
      const void* in = send.data();
      if (in_place) {
        std::copy(send.begin(), send.end(), recv.begin() + r * count * es);
        in = recv.data() + r * count * es;
      }
      EXPECT_OK(comm.AllGather(in, recv.data(), count, t).Wait());
      for (int j = 0; j < p; ++j) {
        CheckCopied(Label("all_gather", t, op, count, in_place), t, op, j, 0,
                    recv.data() + j * count * es, count);
      }
    }
    for (int root : {0, p - 1}) {  // broadcast
      std::vector<std::byte> send = Inputs(t, op, r, 0, count);
      std::vector<std::byte> recv(count * es);
      void* out = in_place ? send.data() : recv.data();
      EXPECT_OK(comm.Broadcast(send.data(), out, count, t, root).Wait());
      CheckCopied(absl::StrCat(Label("broadcast", t, op, count, in_place), " root=", root), t, op,
                  root, 0, static_cast<std::byte*>(out), count);
    }
    {  // all_to_all: rank r's block j holds global elements j*count.. of rank r
      std::vector<std::byte> send = Inputs(t, op, r, 0, count * p);
      std::vector<std::byte> recv(count * p * es);
      std::byte* out = in_place ? send.data() : recv.data();
      EXPECT_OK(comm.AllToAll(send.data(), out, count, t).Wait());
      for (int j = 0; j < p; ++j) {
        CheckCopied(Label("all_to_all", t, op, count, in_place), t, op, j, r * count,
                    out + j * count * es, count);
      }
    }
  }
}

// Min and max keep one operand of a tie between -0 and +0, or of a NaN against a number, and
// which one depends on the order the operands meet in: whatever the algorithm, every rank must end
// with the same bits.
void TestEveryRankEndsWithTheSameBits(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t count : {size_t{4}, size_t{1031}}) {
    std::vector<float> send(count);
    for (size_t i = 0; i < count; ++i) {
      switch (i % 4) {
        case 0:
          send[i] = r % 2 == 0 ? 0.0f : -0.0f;
          break;
        case 1:
          send[i] = r % 2 == 0 ? -0.0f : 0.0f;
          break;
        case 2:
          send[i] = r == 0 ? nan : 1.0f;
          break;
        default:
          send[i] = r == p - 1 ? nan : 2.0f;
          break;
      }
    }
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      std::vector<float> mine(count), everyone(count * p);
      EXPECT_OK(comm.AllReduce(send.data(), mine.data(), count, DataType::kFloat32, op).Wait());
      EXPECT_OK(comm.AllGather(mine.data(), everyone.data(), count, DataType::kFloat32).Wait());
      for (int j = 1; j < p; ++j) {
        if (std::memcmp(&everyone[j * count], everyone.data(), count * sizeof(float)) != 0) {
          Fail(absl::StrCat("all_reduce float32 ", Name(op), " count=", count, ": rank ", j,
                            " holds other bits than rank 0"));
        }
      }
    }
  }
}

int SuiteCollectives(Communicator& comm) {
  TestEveryRankEndsWithTheSameBits(comm);
  for (DataType t : kTypes) {
    for (size_t count : kSmallCounts) {
      for (ReduceOp op : kOps) TestReductions(comm, t, op, count);
      TestDataMovement(comm, t, count);
    }
  }
  // Large messages: several rounds and chunks, for representative type/op pairs.
  TestReductions(comm, DataType::kFloat32, ReduceOp::kSum, kLargeCount);
  TestReductions(comm, DataType::kBFloat16, ReduceOp::kAvg, kLargeCount);
  TestReductions(comm, DataType::kInt64, ReduceOp::kMin, kLargeCount);
  TestDataMovement(comm, DataType::kUint8, kLargeCount * 3);
  TestDataMovement(comm, DataType::kFloat64, kLargeCount);
  EXPECT_OK(comm.Barrier().Wait());
  return failures;
}

// Tiny collectives may run on the submitting thread (the engine's eager path); a late peer must
// neither hold the submitter up nor disturb order or results.
void TestTinyOperationsWithLatePeers(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  // Every rank but 0 arrives 100 ms late: rank 0's Submit hands out a Work that is not done,
  // instead of waiting for them.
  if (r != 0) usleep(static_cast<useconds_t>(100'000 * TimeScale()));
  int64_t late = r + 1;
  Work first = comm.AllReduce(&late, &late, 1, DataType::kInt64, ReduceOp::kSum);
  if (r == 0 && p > 1 && first.Test()) Fail("a tiny all-reduce waited for late peers in Submit");
  EXPECT_OK(first.Wait());
  if (late != int64_t{p} * (p + 1) / 2) Fail(absl::StrCat("late all_reduce: got ", late));
  // Tiny all-reduces in flight, some ranks late now and then, with larger collectives and
  // barriers (never run eagerly) in between: all complete in order with exact results.
  constexpr int kOps = 300;
  std::vector<std::array<int32_t, 2>> values(kOps);
  std::vector<std::vector<std::byte>> larger;
  std::vector<Work> works;
  for (int k = 0; k < kOps; ++k) {
    if (k % 23 == r % 23) usleep(2000);
    values[k] = {r + k, 2 * r};
    works.push_back(
        comm.AllReduce(values[k].data(), values[k].data(), 2, DataType::kInt32, ReduceOp::kSum));
    if (k % 50 == 7) works.push_back(comm.Barrier());
    if (k % 50 == 11) {
      larger.push_back(Inputs(DataType::kInt32, ReduceOp::kSum, r, k, 1031));
      works.push_back(comm.AllReduce(larger.back().data(), larger.back().data(), 1031,
                                     DataType::kInt32, ReduceOp::kSum));
    }
  }
  for (const Work& w : works) EXPECT_OK(w.Wait());
  const int32_t ranks = p * (p - 1) / 2;
  for (int k = 0; k < kOps; ++k) {
    if (values[k][0] != ranks + p * k || values[k][1] != 2 * ranks) {
      Fail(absl::StrCat("tiny all_reduce ", k, ": got ", values[k][0], ", ", values[k][1]));
    }
  }
  for (size_t i = 0; i < larger.size(); ++i) {
    CheckReduced(absl::StrCat("all_reduce between tiny ones ", i), DataType::kInt32, ReduceOp::kSum,
                 p, 50 * i + 11, larger[i].data(), 1031);
  }
}

int SuiteAsync(Communicator& comm) {
  // Many operations in flight at once complete in order with correct results.
  const int p = comm.size();
  constexpr int kOps = 16;
  constexpr size_t kCount = 4099;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<Work> works;
  for (int k = 0; k < kOps; ++k) {
    buffers.push_back(Inputs(DataType::kInt32, ReduceOp::kSum, comm.rank(), k, kCount));
    works.push_back(comm.AllReduce(buffers.back().data(), buffers.back().data(), kCount,
                                   DataType::kInt32, ReduceOp::kSum));
  }
  for (int k = kOps - 1; k >= 0; --k) EXPECT_OK(works[k].Wait());
  for (int k = 0; k < kOps; ++k) {
    CheckReduced(absl::StrCat("async all_reduce ", k), DataType::kInt32, ReduceOp::kSum, p, k,
                 buffers[k].data(), kCount);
  }
  // test() eventually reports completion without wait().
  std::vector<std::byte> data = Inputs(DataType::kFloat32, ReduceOp::kSum, comm.rank(), 0, 1000);
  Work w = comm.AllReduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
  for (int i = 0; i < 200000 * TimeScale() && !w.Test(); ++i) usleep(50);
  if (!w.Test()) Fail("Test() never reported completion");
  EXPECT_OK(w.status());
  TestTinyOperationsWithLatePeers(comm);
  return failures;
}

int SuiteP2p(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const int right = (r + 1) % p, left = (r - 1 + p) % p;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
    // A ring exchange in a group: would deadlock for large messages without group semantics.
    std::vector<std::byte> send = Inputs(DataType::kFloat32, ReduceOp::kMax, r, 0, count);
    std::vector<std::byte> recv(count * 4);
    comm.GroupStart();
    Work a = comm.Send(send.data(), count, DataType::kFloat32, right, 7);
    Work b = comm.Recv(recv.data(), count, DataType::kFloat32, left, 7);
    Work g = comm.GroupEnd();
    EXPECT_OK(g.Wait());
    EXPECT_OK(a.Wait());
    EXPECT_OK(b.Wait());
    CheckCopied(absl::StrCat("grouped ring send/recv count=", count), DataType::kFloat32,
                ReduceOp::kMax, left, 0, recv.data(), count);
  }
  if (p >= 2) {
    // Ordered pipe between ranks 0 and 1: several tagged messages, received in order.
    if (r == 0) {
      for (int k = 0; k < 5; ++k) {
        std::vector<std::byte> msg = Inputs(DataType::kInt64, ReduceOp::kMax, 0, k, 100 + k);
        EXPECT_OK(comm.Send(msg.data(), 100 + k, DataType::kInt64, 1, k).Wait());
      }
    } else if (r == 1) {
      std::vector<Work> works;
      std::vector<std::vector<std::byte>> msgs(5);
      for (int k = 0; k < 5; ++k) {
        msgs[k].resize((100 + k) * 8);
        works.push_back(comm.Recv(msgs[k].data(), 100 + k, DataType::kInt64, 0, k));
      }
      for (int k = 0; k < 5; ++k) {
        EXPECT_OK(works[k].Wait());
        CheckCopied(absl::StrCat("pipe message ", k), DataType::kInt64, ReduceOp::kMax, 0, k,
                    msgs[k].data(), 100 + k);
      }
    }
  }
  EXPECT_OK(comm.Barrier().Wait());
  return failures;
}

int SuiteSplit(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  // Even and odd ranks, ordered in reverse.
  absl::StatusOr<std::unique_ptr<Communicator>> half = comm.Split(r % 2, -r);
  EXPECT_OK(half.status());
  if (!half.ok()) return failures;
  Communicator& sub = **half;
  const int expected_size = (p + 1 - r % 2) / 2;
  if (sub.size() != expected_size) Fail(absl::StrCat("split size ", sub.size()));
  std::vector<int32_t> mine = {r};
  std::vector<int32_t> all(sub.size());
  EXPECT_OK(sub.AllGather(mine.data(), all.data(), 1, DataType::kInt32).Wait());
  for (int i = 1; i < sub.size(); ++i) {
    if (all[i] >= all[i - 1]) Fail("split order is not by key");
  }
  for (int32_t v : all) {
    if (v % 2 != r % 2) Fail("split mixed colors");
  }
  for (DataType t : {DataType::kFloat32, DataType::kInt8}) {
    for (ReduceOp op : kOps) TestReductions(sub, t, op, 1031);
    TestDataMovement(sub, t, 1031);
  }
  // The parent still works alongside the child.
  TestReductions(comm, DataType::kInt32, ReduceOp::kSum, 77);
  // A child with a configuration of its own: it forces the ring whatever WEFT_ALGO says.
  CommOptions ring;
  ring.algorithm = "ring";
  absl::StatusOr<std::unique_ptr<Communicator>> forced = comm.Split(0, r, ring);
  EXPECT_OK(forced.status());
  if (forced.ok()) {
    const std::string ran = (*forced)->AlgorithmFor("all_reduce", 1 << 20);
    if (ran != "ring") Fail(absl::StrCat("the child forcing the ring runs ", ran));
    TestReductions(**forced, DataType::kFloat32, ReduceOp::kSum, 1031);
  }
  // A rank can opt out.
  absl::StatusOr<std::unique_ptr<Communicator>> none = comm.Split(r == 0 ? -1 : 1, 0);
  EXPECT_OK(none.status());
  if (none.ok() && (r == 0) != (*none == nullptr)) Fail("negative color should yield nullptr");
  if (none.ok() && *none != nullptr) {
    TestReductions(**none, DataType::kUint32, ReduceOp::kMax, 100);
  }
  return failures;
}

int SuiteUniqueId(Communicator& comm) {
  // Rank r first makes r unrelated one-rank communicators from ids of its own: the ranks have
  // made different numbers of communicators when they meet on the common one below, which must
  // not shift where they look for each other in its store.
  std::vector<std::unique_ptr<Communicator>> unrelated;
  for (int i = 0; i < comm.rank(); ++i) {
    absl::StatusOr<std::string> own = Communicator::CreateUniqueId("127.0.0.1");
    EXPECT_OK(own.status());
    if (!own.ok()) return failures;
    absl::StatusOr<std::unique_ptr<Communicator>> alone = Communicator::Create(*own, 0, 1);
    EXPECT_OK(alone.status());
    if (!alone.ok()) return failures;
    unrelated.push_back(*std::move(alone));
  }
  // Rank 0 makes an id, hands it out with a broadcast, and everyone builds a second communicator.
  std::string id(256, '\0');
  if (comm.rank() == 0) {
    absl::StatusOr<std::string> made = Communicator::CreateUniqueId("127.0.0.1");
    EXPECT_OK(made.status());
    if (!made.ok()) return failures;
    id = *made;
    id.resize(256, '\0');
  }
  EXPECT_OK(comm.Broadcast(id.data(), id.data(), id.size(), DataType::kUint8, 0).Wait());
  id.resize(std::strlen(id.c_str()));
  absl::StatusOr<std::unique_ptr<Communicator>> second =
      Communicator::Create(id, comm.rank(), comm.size());
  EXPECT_OK(second.status());
  if (second.ok()) TestReductions(**second, DataType::kFloat64, ReduceOp::kSum, 1031);
  return failures;
}

void ExpectError(const std::string& what, const Work& work, absl::StatusCode code,
                 const std::string& needle) {
  absl::Status s = work.Wait();
  if (s.code() != code || !absl::StrContains(s.message(), needle)) {
    Fail(absl::StrCat(what, ": expected ", absl::StatusCodeToString(code), " containing '", needle,
                      "', got ", s.ToString()));
  }
}

int SuiteBadInput(Communicator& comm) {
  const int p = comm.size();
  std::vector<float> buf(64);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  ExpectError("null send",
              comm.AllReduce(nullptr, buf.data(), 4, DataType::kFloat32, ReduceOp::kSum), kInvalid,
              "send buffer is null");
  ExpectError("null recv", comm.AllGather(buf.data(), nullptr, 4, DataType::kFloat32), kInvalid,
              "recv buffer is null");
  ExpectError("bad dtype",
              comm.AllReduce(buf.data(), buf.data(), 4, static_cast<DataType>(42), ReduceOp::kSum),
              kInvalid, "invalid data type");
  ExpectError(
      "bad op",
      comm.AllReduce(buf.data(), buf.data(), 4, DataType::kFloat32, static_cast<ReduceOp>(9)),
      kInvalid, "invalid reduce op");
  ExpectError("bad root", comm.Broadcast(buf.data(), buf.data(), 4, DataType::kFloat32, p),
              kInvalid, "root");
  ExpectError("negative root",
              comm.Reduce(buf.data(), buf.data(), 4, DataType::kFloat32, ReduceOp::kSum, -1),
              kInvalid, "root");
  ExpectError("bad peer", comm.Send(buf.data(), 4, DataType::kFloat32, p + 3), kInvalid, "peer");
  ExpectError("self peer", comm.Recv(buf.data(), 4, DataType::kFloat32, comm.rank()), kInvalid,
              "itself");
  ExpectError(
      "overflow",
      comm.AllReduce(buf.data(), buf.data(), SIZE_MAX / 2, DataType::kFloat64, ReduceOp::kSum),
      kInvalid, "overflows");
  ExpectError("overflow blocks",
              comm.AllGather(buf.data(), buf.data(), SIZE_MAX / 2, DataType::kUint8), kInvalid,
              "overflows");
  // The communicator still works after rejected calls.
  TestReductions(comm, DataType::kInt32, ReduceOp::kSum, 13);
  return failures;
}

// Ranks disagree on the count: every rank must fail (not hang, not corrupt) by the timeout at
// the latest, with a message naming the operation.
int SuiteMismatch(Communicator& comm) {
  std::vector<float> buf(4096, 1.0f);
  const size_t count = comm.rank() == 0 ? 1024 : 4096;
  absl::Status s =
      comm.AllReduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum).Wait();
  if (s.ok()) {
    Fail("mismatched all_reduce succeeded");
  } else if (!absl::StrContains(s.message(), "all_reduce")) {
    Fail("mismatch error does not name the operation: " + s.ToString());
  } else {
    std::fprintf(stderr, "expected error: %s\n", s.ToString().c_str());
  }
  // Later operations fail fast, pointing at the first failure.
  absl::Status after = comm.Barrier().Wait();
  if (after.ok()) Fail("operation after a failed collective succeeded");
  return failures;
}

// Wait(timeout) returns on time while the peers are late, and Abort ends a blocked operation.
int SuiteAbort(Communicator& comm) {
  std::vector<float> buf(1024, 1.0f);
  if (comm.rank() == 0) {
    Work w = comm.AllReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    const auto start = absl::Now();
    absl::Status s = w.Wait(absl::Milliseconds(200));
    if (s.code() != absl::StatusCode::kDeadlineExceeded) Fail("short wait: " + s.ToString());
    if (absl::Now() - start > Scaled(absl::Seconds(1))) Fail("short wait took too long");
    const auto abort_start = absl::Now();
    comm.Abort();
    absl::Status aborted = w.Wait();
    if (aborted.ok()) Fail("aborted operation succeeded");
    if (absl::Now() - abort_start > Scaled(absl::Seconds(1))) Fail("abort took too long");
    std::fprintf(stderr, "expected error: %s\n", aborted.ToString().c_str());
  }
  // The other ranks never join; they stay alive meanwhile, so the operation is blocked on late
  // peers rather than failed by dead ones.
  if (comm.rank() != 0) usleep(static_cast<useconds_t>(3 * 1000 * 1000 * TimeScale()));
  return failures;
}

// Run pinned to one core (main): every rank of the job runs on this machine, whatever host each
// pretends to be on, so the ranks share its cores and must wait as oversubscribed ranks do.
int SuiteOversubscribed(Communicator& comm) {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) {
    Fail("sched_getaffinity failed");
    return failures;
  }
  const bool expected = comm.size() > CPU_COUNT(&cpus);
  auto oversubscribed = [](const Communicator& c) {
    return weft::internal::StateOf(c).oversubscribed();
  };
  if (oversubscribed(comm) != expected) {
    Fail(absl::StrCat("oversubscribed is ", oversubscribed(comm), " with ", comm.size(),
                      " ranks on this machine and ", CPU_COUNT(&cpus), " CPUs for this rank"));
  }
  // A communicator of this rank alone split from the world sees one rank, but the machine still
  // runs them all.
  absl::StatusOr<std::unique_ptr<Communicator>> alone = comm.Split(comm.rank(), 0);
  if (!alone.ok()) {
    Fail("split: " + alone.status().ToString());
  } else if (oversubscribed(**alone) != expected) {
    Fail(absl::StrCat("after a split into single ranks, oversubscribed is ",
                      oversubscribed(**alone)));
  }
  // The setting belongs to a communicator: one of this rank alone, made from its own unique id,
  // has a core to itself.
  absl::StatusOr<std::string> id = Communicator::CreateUniqueId("127.0.0.1");
  if (!id.ok()) {
    Fail("unique id: " + id.status().ToString());
    return failures;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> own = Communicator::Create(*id, 0, 1);
  if (!own.ok()) {
    Fail("own communicator: " + own.status().ToString());
  } else if (oversubscribed(**own)) {
    Fail("a communicator of one rank on its own core is oversubscribed");
  } else if (expected && !oversubscribed(comm)) {
    Fail("creating another communicator changed the world's setting");
  }
  return failures;
}

// Pins this process to the first CPU it may run on.
bool PinToOneCpu() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &cpus)) continue;
    CPU_ZERO(&cpus);
    CPU_SET(cpu, &cpus);
    return sched_setaffinity(0, sizeof(cpus), &cpus) == 0;
  }
  return false;
}

// The value of `"key": "..."` in one line of a flight-recorder dump, or "".
std::string JsonField(absl::string_view line, absl::string_view key) {
  const std::string start = absl::StrCat("\"", key, "\": \"");
  const size_t from = line.find(start);
  if (from == absl::string_view::npos) return "";
  const size_t begin = from + start.size();
  const size_t end = line.find('"', begin);
  return end == absl::string_view::npos ? "" : std::string(line.substr(begin, end - begin));
}

// Checks WEFT_EXPECT_ALGO against the algorithms the flight recorder says the collectives ran on.
void CheckAlgorithmsRan(Communicator& comm, const char* expect) {
  std::map<std::string, std::string> expected;
  for (absl::string_view item : absl::StrSplit(expect, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, '=');
    expected[kv.first] = kv.second;
  }
  absl::StatusOr<std::string> path = comm.DumpFlightRecorder("algorithm check");
  if (!path.ok()) {
    Fail("dumping the flight recorder: " + path.status().ToString());
    return;
  }
  std::ifstream file(*path);
  std::map<std::string, int> seen;
  std::map<std::string, std::map<std::string, int>> wrong;
  for (std::string line; std::getline(file, line);) {
    if (!absl::StrContains(line, "\"collective\": true")) continue;
    const std::string op = JsonField(line, "op");
    const auto it = expected.find(op);
    if (it == expected.end()) continue;
    ++seen[op];
    const std::string ran = JsonField(line, "algorithm");
    if (ran != it->second) ++wrong[op][ran];
  }
  std::string report;
  for (const auto& [op, algorithm] : expected) {
    if (seen[op] == 0) Fail(absl::StrCat(op, ": no ", op, " in the flight recorder"));
    for (const auto& [ran, n] : wrong[op]) {
      Fail(absl::StrCat(op, ": ", n, " of ", seen[op], " ran on ", ran, ", not ", algorithm));
    }
    absl::StrAppend(&report, " ", op, "=", algorithm, " (", seen[op], ")");
  }
  if (comm.rank() == 0) std::fprintf(stderr, "algorithms checked:%s\n", report.c_str());
}

// Makes process_vm_readv fail with EPERM in this process (cross-memory attach denied, as ptrace
// restrictions deny it); every other system call passes.
bool DenyCrossMemoryAttach() {
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#else
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#else
  errno = ENOSYS;  // no filter for this architecture here
  return false;
#endif
}

}  // namespace
}  // namespace weft::testing

int main(int argc, char** argv) {
  using namespace weft::testing;
  if (argc < 2) {
    std::fprintf(stderr, "usage: comm_worker SUITE [--fake-hosts K]\n");
    return 2;
  }
  const std::string suite = argv[1];
  if (argc >= 4 && std::string(argv[2]) == "--fake-hosts") {
    absl::StatusOr<weft::LaunchEnvironment> env = weft::ReadLaunchEnvironment();
    int hosts = 1;
    if (!env.ok() || !absl::SimpleAtoi(argv[3], &hosts) || hosts < 1) return 2;
    setenv("WEFT_HOSTNAME", absl::StrCat("host", env->rank % hosts).c_str(), 1);
  }
  if (argc >= 3 && std::string(argv[2]) == "--deny-cma" && !DenyCrossMemoryAttach()) {
    std::fprintf(stderr, "FAIL denying cross-memory attach: %s\n", std::strerror(errno));
    return 1;
  }
  if (suite == "oversubscribed" && !PinToOneCpu()) {
    std::fprintf(stderr, "FAIL pinning to one CPU\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<weft::Communicator>> comm =
      weft::Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "FAIL creating communicator: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  int result = 0;
  if (suite == "collectives")
    result = SuiteCollectives(**comm);
  else if (suite == "async")
    result = SuiteAsync(**comm);
  else if (suite == "p2p")
    result = SuiteP2p(**comm);
  else if (suite == "split")
    result = SuiteSplit(**comm);
  else if (suite == "unique_id")
    result = SuiteUniqueId(**comm);
  else if (suite == "bad_input")
    result = SuiteBadInput(**comm);
  else if (suite == "mismatch")
    result = SuiteMismatch(**comm);
  else if (suite == "abort")
    result = SuiteAbort(**comm);
  else if (suite == "oversubscribed")
    result = SuiteOversubscribed(**comm);
  else {
    std::fprintf(stderr, "unknown suite %s\n", suite.c_str());
    return 2;
  }
  if (const char* expect = std::getenv("WEFT_EXPECT_ALGO"); expect != nullptr) {
    CheckAlgorithmsRan(**comm, expect);
    result = failures;
  }
  if (result != 0) {
    std::fprintf(stderr, "rank %d: %d failures\n", (*comm)->rank(), result);
    // Peers may still wait on this rank: leave without running destructors.
    std::fflush(nullptr);
    _exit(1);
  }
  return 0;
}
