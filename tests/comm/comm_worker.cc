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
      if (!in_place) CheckCopied(what + " send buffer", t, op, r, 0, send.data(), count);
    }
    {  // reduce_scatter: global element index = block * count + i
      std::vector<std::byte> send = Inputs(t, op, r, 0, count * p);
      std::vector<std::byte> recv(count * es);
      std::byte* out = in_place ? send.data() + r * count * es : recv.data();
      EXPECT_OK(comm.ReduceScatter(send.data(), out, count, t, op).Wait());
      const std::string what = Label("reduce_scatter", t, op, count, in_place);
      CheckReduced(what, t, op, p, r * count, out, count);
      if (!in_place) CheckCopied(what + " send buffer", t, op, r, 0, send.data(), count * p);
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

// The variable-count collectives. Their blocks: element counts per rank with zeros among uneven
// sizes, laid out in buffers with gaps (which must stay untouched) and out of rank order.
constexpr std::byte kUntouched{0x5a};

std::string CountsText(const std::vector<size_t>& counts) {
  std::string text;
  for (size_t c : counts) absl::StrAppend(&text, text.empty() ? "" : ",", c);
  return text;
}

// Displacements for `counts` with `gap` elements before each block, the last rank's block first
// when `reversed`; returns the elements the layout spans.
size_t LayOut(const std::vector<size_t>& counts, size_t gap, bool reversed,
              std::vector<size_t>* displs) {
  const int p = static_cast<int>(counts.size());
  displs->assign(p, 0);
  size_t end = 0;
  for (int i = 0; i < p; ++i) {
    const int r = reversed ? p - 1 - i : i;
    (*displs)[r] = end + gap;
    end += gap + counts[r];
  }
  return end;
}

// Every byte of `buffer` outside the blocks still holds kUntouched.
void CheckGaps(const std::string& what, const std::vector<std::byte>& buffer, size_t es,
               const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  std::vector<bool> covered(buffer.size());
  for (size_t r = 0; r < counts.size(); ++r) {
    std::fill_n(covered.begin() + displs[r] * es, counts[r] * es, true);
  }
  for (size_t i = 0; i < buffer.size(); ++i) {
    if (!covered[i] && buffer[i] != kUntouched) {
      Fail(absl::StrCat(what, ": byte ", i, " outside every block was written"));
      return;
    }
  }
}

// Per-rank counts: uneven with zeros, the first rank empty, nothing at all, one element each,
// and (last) one block larger than the shared-memory round and the TCP stripe.
std::vector<std::vector<size_t>> CountPatterns(int p) {
  std::vector<std::vector<size_t>> patterns(5, std::vector<size_t>(p));
  for (int r = 0; r < p; ++r) {
    patterns[0][r] = r % 3 == 1 ? 0 : 13 + 5 * r;
    patterns[1][r] = r == 0 ? 0 : 1031 * r;
    patterns[2][r] = 0;
    patterns[3][r] = 1;
    patterns[4][r] = r == p - 1 ? kLargeCount : 7;
  }
  return patterns;
}

void TestAllGatherV(Communicator& comm, DataType t, const std::vector<size_t>& counts) {
  const int p = comm.size(), r = comm.rank();
  const size_t es = SizeOf(t);
  const ReduceOp op = ReduceOp::kMax;  // selects the wide-range input values
  std::vector<size_t> displs;
  const size_t extent = LayOut(counts, 3, /*reversed=*/true, &displs);
  for (bool in_place : {false, true}) {
    const std::string what = absl::StrCat("all_gather_v ", Name(t), " counts=", CountsText(counts),
                                          in_place ? " in-place" : " out-of-place");
    std::vector<std::byte> recv(extent * es, kUntouched);
    std::vector<std::byte> send = Inputs(t, op, r, 0, counts[r]);
    const void* in = send.data();
    if (in_place) {
      std::copy(send.begin(), send.end(), recv.begin() + displs[r] * es);
      in = recv.data() + displs[r] * es;
    }
    EXPECT_OK(comm.AllGatherV(in, counts[r], recv.data(), counts, displs, t).Wait());
    for (int j = 0; j < p; ++j) {
      CheckCopied(what, t, op, j, 0, recv.data() + displs[j] * es, counts[j]);
    }
    CheckGaps(what, recv, es, counts, displs);
  }
}

// Global element i of the reduction is element i of every rank's send buffer.
void TestReduceScatterV(Communicator& comm, DataType t, ReduceOp op,
                        const std::vector<size_t>& counts) {
  const int p = comm.size(), r = comm.rank();
  const size_t es = SizeOf(t);
  std::vector<size_t> displs;
  const size_t total = LayOut(counts, 0, /*reversed=*/false, &displs);
  for (bool in_place : {false, true}) {
    const std::string what =
        absl::StrCat("reduce_scatter_v ", Name(t), " ", Name(op), " counts=", CountsText(counts),
                     in_place ? " in-place" : " out-of-place");
    std::vector<std::byte> send = Inputs(t, op, r, 0, total);
    std::vector<std::byte> recv(counts[r] * es);
    std::byte* out = in_place ? send.data() + displs[r] * es : recv.data();
    EXPECT_OK(comm.ReduceScatterV(send.data(), out, counts, t, op).Wait());
    CheckReduced(what, t, op, p, displs[r], out, counts[r]);
  }
}

// Elements rank i sends rank j: uneven with zeros (pattern 0), symmetric (1), one large pair
// (2), nothing (3).
size_t PairCount(int pattern, int i, int j, int p) {
  switch (pattern) {
    case 0:
      return (i * 3 + j * 5) % 4 == 3 ? 0 : 3 + 7 * i + 2 * j;
    case 1:
      return (i + j) % 3 == 1 ? 0 : 5 + i + j + i * j;
    case 2:
      return i == 0 && j == p - 1 ? kLargeCount : (i == j ? 0 : 2);
    default:
      return 0;
  }
}

// Rank i's block for rank j holds global elements j * kPairStride.. of rank i.
constexpr uint64_t kPairStride = 1000003;

void TestAllToAllV(Communicator& comm, DataType t, int pattern) {
  const int p = comm.size(), r = comm.rank();
  const size_t es = SizeOf(t);
  const ReduceOp op = ReduceOp::kMax;
  std::vector<size_t> send_counts(p), recv_counts(p);
  for (int j = 0; j < p; ++j) {
    send_counts[j] = PairCount(pattern, r, j, p);
    recv_counts[j] = PairCount(pattern, j, r, p);
  }
  // Decided alike on every rank: from the whole matrix.
  bool symmetric = true;
  for (int i = 0; i < p; ++i) {
    for (int j = 0; j < p; ++j)
      symmetric &= PairCount(pattern, i, j, p) == PairCount(pattern, j, i, p);
  }
  for (bool in_place : {false, true}) {
    // In place the send and receive layouts are one (MPI_IN_PLACE): only symmetric counts.
    if (in_place && !symmetric) continue;
    const std::string what = absl::StrCat("all_to_all_v ", Name(t), " pattern ", pattern,
                                          " send_counts=", CountsText(send_counts),
                                          in_place ? " in-place" : " out-of-place");
    std::vector<size_t> send_displs, recv_displs;
    const size_t send_extent = LayOut(send_counts, 2, /*reversed=*/!in_place, &send_displs);
    const size_t recv_extent = LayOut(recv_counts, in_place ? 2 : 1, false, &recv_displs);
    std::vector<std::byte> send(send_extent * es, kUntouched);
    for (int j = 0; j < p; ++j) {
      std::vector<std::byte> block = Inputs(t, op, r, j * kPairStride, send_counts[j]);
      std::copy(block.begin(), block.end(), send.begin() + send_displs[j] * es);
    }
    std::vector<std::byte> recv(recv_extent * es, kUntouched);
    std::vector<std::byte>& out = in_place ? send : recv;
    EXPECT_OK(comm.AllToAllV(send.data(), send_counts, send_displs, out.data(), recv_counts,
                             recv_displs, t)
                  .Wait());
    for (int i = 0; i < p; ++i) {
      CheckCopied(what, t, op, i, r * kPairStride, out.data() + recv_displs[i] * es,
                  recv_counts[i]);
    }
    CheckGaps(what, out, es, recv_counts, recv_displs);
  }
}

int SuiteVCollectives(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const std::vector<std::vector<size_t>> patterns = CountPatterns(p);
  const std::vector<size_t>& large = patterns.back();
  for (DataType t : kTypes) {
    for (size_t k = 0; k + 1 < patterns.size(); ++k) {
      TestAllGatherV(comm, t, patterns[k]);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        TestReduceScatterV(comm, t, op, patterns[k]);
      }
    }
    for (int pattern : {0, 1, 3}) TestAllToAllV(comm, t, pattern);
  }
  TestAllGatherV(comm, DataType::kFloat32, large);
  TestReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum, large);
  TestReduceScatterV(comm, DataType::kBFloat16, ReduceOp::kAvg, large);
  TestAllToAllV(comm, DataType::kUint8, 2);
  TestAllToAllV(comm, DataType::kFloat64, 2);
  // Empty blocks need no buffer, and their displacements mean nothing.
  const std::vector<size_t> none(p, 0), nowhere(p, SIZE_MAX / 2);
  EXPECT_OK(comm.AllGatherV(nullptr, 0, nullptr, none, nowhere, DataType::kFloat64).Wait());
  EXPECT_OK(comm.ReduceScatterV(nullptr, nullptr, none, DataType::kInt8, ReduceOp::kProd).Wait());
  EXPECT_OK(
      comm.AllToAllV(nullptr, none, nowhere, nullptr, none, nowhere, DataType::kFloat16).Wait());
  // In flight together with the other collectives: they complete in issue order, all exact.
  const std::vector<size_t>& counts = patterns[0];
  std::vector<size_t> displs;
  const size_t total = LayOut(counts, 0, false, &displs);
  std::vector<std::byte> reduced = Inputs(DataType::kInt32, ReduceOp::kSum, r, 0, 1031);
  std::vector<std::byte> mine = Inputs(DataType::kInt32, ReduceOp::kMax, r, 0, counts[r]);
  std::vector<std::byte> gathered(total * 4);
  std::vector<std::byte> scattered_in = Inputs(DataType::kInt32, ReduceOp::kSum, r, 0, total);
  std::vector<std::byte> scattered(counts[r] * 4);
  std::vector<Work> works;
  works.push_back(
      comm.AllGatherV(mine.data(), counts[r], gathered.data(), counts, displs, DataType::kInt32));
  works.push_back(
      comm.AllReduce(reduced.data(), reduced.data(), 1031, DataType::kInt32, ReduceOp::kSum));
  works.push_back(comm.ReduceScatterV(scattered_in.data(), scattered.data(), counts,
                                      DataType::kInt32, ReduceOp::kSum));
  works.push_back(comm.Barrier());
  for (auto it = works.rbegin(); it != works.rend(); ++it) EXPECT_OK(it->Wait());
  for (int j = 0; j < p; ++j) {
    CheckCopied("all_gather_v in flight", DataType::kInt32, ReduceOp::kMax, j, 0,
                gathered.data() + displs[j] * 4, counts[j]);
  }
  CheckReduced("all_reduce between *_v", DataType::kInt32, ReduceOp::kSum, p, 0, reduced.data(),
               1031);
  CheckReduced("reduce_scatter_v in flight", DataType::kInt32, ReduceOp::kSum, p, displs[r],
               scattered.data(), counts[r]);
  for (const char* name : {"all_gather_v", "reduce_scatter_v", "all_to_all_v"}) {
    const std::string ran = comm.AlgorithmFor(name, 1 << 20);
    const std::string want = absl::EndsWith(name, "all_to_all_v") ? "pairwise" : "ring";
    if (ran != want) Fail(absl::StrCat(name, " runs on ", ran, ", not ", want));
  }
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

// The *_v collectives' argument errors (for at least two ranks): each names what is wrong.
void ExpectVariableCountErrors(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const DataType f32 = DataType::kFloat32;
  std::vector<float> buf(64 * p), other(64 * p);
  std::vector<size_t> counts(p, 4), displs(p);
  for (int j = 0; j < p; ++j) displs[j] = 4 * j;
  const std::vector<size_t> short_counts(p - 1, 4);
  ExpectError("all_gather_v counts per rank",
              comm.AllGatherV(buf.data(), 4, other.data(), short_counts, displs, f32), kInvalid,
              absl::StrCat("recv_counts has ", p - 1));
  ExpectError("all_gather_v displacements per rank",
              comm.AllGatherV(buf.data(), 4, other.data(), counts, short_counts, f32), kInvalid,
              "recv_displs has");
  ExpectError("all_gather_v send_count",
              comm.AllGatherV(buf.data(), 3, other.data(), counts, displs, f32), kInvalid,
              absl::StrCat("send_count is 3 but recv_counts[", r, "] is 4"));
  std::vector<size_t> overlapping = displs;
  overlapping[1] = 2;
  ExpectError("all_gather_v overlapping blocks",
              comm.AllGatherV(buf.data(), 4, other.data(), counts, overlapping, f32), kInvalid,
              "recv blocks 0 and 1 overlap");
  ExpectError(
      "all_gather_v send inside another block",
      comm.AllGatherV(other.data() + displs[(r + 1) % p] + 1, 4, other.data(), counts, displs, f32),
      kInvalid, absl::StrCat("send overlaps recv block ", (r + 1) % p));
  ExpectError("all_gather_v null recv",
              comm.AllGatherV(buf.data(), 4, nullptr, counts, displs, f32), kInvalid,
              "recv buffer is null");
  std::vector<size_t> far = displs;
  far[p - 1] = SIZE_MAX / 2;
  ExpectError("all_gather_v displacement overflow",
              comm.AllGatherV(buf.data(), 4, other.data(), counts, far, f32), kInvalid,
              "overflows the address space");
  ExpectError("reduce_scatter_v counts per rank",
              comm.ReduceScatterV(buf.data(), other.data(), short_counts, f32, ReduceOp::kSum),
              kInvalid, "recv_counts has");
  ExpectError("reduce_scatter_v bad op",
              comm.ReduceScatterV(buf.data(), other.data(), counts, f32, static_cast<ReduceOp>(9)),
              kInvalid, "invalid reduce op");
  ExpectError("reduce_scatter_v recv inside send",
              comm.ReduceScatterV(buf.data(), buf.data() + 4 * r + 1, counts, f32, ReduceOp::kSum),
              kInvalid, "recv overlaps send block");
  std::vector<size_t> huge(p, SIZE_MAX / p + 1);
  ExpectError("reduce_scatter_v total overflow",
              comm.ReduceScatterV(buf.data(), other.data(), huge, f32, ReduceOp::kSum), kInvalid,
              "overflows");
  ExpectError("all_to_all_v counts per rank",
              comm.AllToAllV(buf.data(), counts, displs, other.data(), counts, short_counts, f32),
              kInvalid, "recv_displs has");
  std::vector<size_t> more = counts;
  more[r] = 5;
  ExpectError("all_to_all_v own block",
              comm.AllToAllV(buf.data(), more, displs, other.data(), counts, displs, f32), kInvalid,
              absl::StrCat("send_counts[", r, "] is 5 but recv_counts[", r, "] is 4"));
  ExpectError("all_to_all_v overlapping receive blocks",
              comm.AllToAllV(buf.data(), counts, displs, other.data(), counts, overlapping, f32),
              kInvalid, "recv blocks 0 and 1 overlap");
  ExpectError("all_to_all_v null send",
              comm.AllToAllV(nullptr, counts, displs, other.data(), counts, displs, f32), kInvalid,
              "send buffer is null");
  ExpectError("all_to_all_v bad dtype",
              comm.AllToAllV(buf.data(), counts, displs, other.data(), counts, displs,
                             static_cast<DataType>(42)),
              kInvalid, "invalid data type");
  // Send blocks are only read: they may overlap.
  const std::vector<size_t> same(p, 0);
  std::vector<size_t> ones(p, 1);
  std::vector<float> sent(1, static_cast<float>(r)), got(p, -1.0f);
  std::vector<size_t> by_rank(p);
  for (int j = 0; j < p; ++j) by_rank[j] = j;
  EXPECT_OK(comm.AllToAllV(sent.data(), ones, same, got.data(), ones, by_rank, f32).Wait());
  for (int j = 0; j < p; ++j) {
    if (got[j] != static_cast<float>(j)) Fail("all_to_all_v from one shared send block");
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
  ExpectVariableCountErrors(comm);
  // The communicator still works after rejected calls.
  TestReductions(comm, DataType::kInt32, ReduceOp::kSum, 13);
  TestAllGatherV(comm, DataType::kInt32, CountPatterns(p)[0]);
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

// Ranks disagree on the size of a block of a *_v collective (the totals agree): a rank that sees
// it fails with a message naming the operation, none hangs, and the failure reaches every rank
// by its next operation. Ranks that agree with each other may finish it: their data is theirs.
int SuiteMismatchV(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  if (p != 3) {
    Fail("mismatch_v runs on 3 ranks");
    return failures;
  }
  // A communicator per case: a failure ends the one it happens on.
  std::vector<std::unique_ptr<Communicator>> cases;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Communicator>> child = comm.Split(0, r);
    EXPECT_OK(child.status());
    if (!child.ok()) return failures;
    cases.push_back(*std::move(child));
  }
  const auto check = [&](Communicator& c, const char* name, const absl::Status& s) {
    if (!s.ok() && !absl::StrContains(s.message(), name)) {
      Fail(absl::StrCat("mismatch error does not name ", name, ": ", s.ToString()));
    } else if (!s.ok()) {
      std::fprintf(stderr, "expected error: %s\n", s.ToString().c_str());
    }
    if (c.Barrier().Wait().ok())
      Fail(absl::StrCat("operation after a failed ", name, " succeeded"));
  };
  const DataType f32 = DataType::kFloat32;
  std::vector<float> send(64, static_cast<float>(r)), recv(64);
  const std::vector<size_t> displs = {0, 8, 16};
  // Rank 0 sees blocks of 4, 5 and 3 elements, the others 4 each.
  const std::vector<size_t> counts =
      r == 0 ? std::vector<size_t>{4, 5, 3} : std::vector<size_t>{4, 4, 4};
  check(*cases[0], "all_gather_v",
        cases[0]->AllGatherV(send.data(), counts[r], recv.data(), counts, displs, f32).Wait());
  check(*cases[1], "reduce_scatter_v",
        cases[1]->ReduceScatterV(send.data(), recv.data(), counts, f32, ReduceOp::kSum).Wait());
  // Rank 0 sends rank 1 three elements, which expects two.
  std::vector<size_t> send_counts = {2, 2, 2};
  if (r == 0) send_counts[1] = 3;
  check(*cases[2], "all_to_all_v",
        cases[2]
            ->AllToAllV(send.data(), send_counts, displs, recv.data(), {2, 2, 2}, displs, f32)
            .Wait());
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
  else if (suite == "v_collectives")
    result = SuiteVCollectives(**comm);
  else if (suite == "mismatch_v")
    result = SuiteMismatchV(**comm);
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
