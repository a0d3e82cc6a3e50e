// One rank of the GradReducer tests (started by weftrun from grad_reducer_test). Exits 0 when
// every check passed; otherwise prints what differed and exits 1.
//
// Gradients hold small integers scaled per rank, so the sum over ranks is exact and the average
// must equal fl(sum / size) bit for bit. With a 16-bit wire they hold reducer_checks.h's values,
// whose rounded sums are exact too.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "reducer_checks.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"
#include "weft/kernels/dtype.h"
#include "weft/shard/grad_reducer.h"

namespace {

using weft::DataType;
using weft::testing::Check;
using weft::testing::CheckOk;
using weft::testing::failures;
using weft::testing::rank;
using weft::testing::Scaled;
using weft::testing::TimeScale;

float Value(int r, size_t grad, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>((grad * 7 + i) % 13));
}

// Gradients of sizes `counts`: the first `flat` of them back to back in one buffer (reduced in
// place), the others in buffers of their own (packed through staging).
struct Grads {
  std::vector<float> flat_buffer;
  std::vector<std::vector<float>> separate;
  std::vector<weft::shard::Gradient> views;

  Grads(const std::vector<size_t>& counts, size_t flat) {
    size_t total = 0;
    for (size_t k = 0; k < flat; ++k) total += counts[k];
    flat_buffer.resize(total);
    separate.resize(counts.size());
    size_t offset = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      float* data;
      if (k < flat) {
        data = flat_buffer.data() + offset;
        offset += counts[k];
      } else {
        separate[k].resize(counts[k]);
        data = separate[k].data();
      }
      views.push_back({absl::StrCat("g", k), data, counts[k]});
    }
  }
  void Fill(int r) {
    for (size_t k = 0; k < views.size(); ++k) {
      auto* data = static_cast<float*>(views[k].data);
      for (size_t i = 0; i < views[k].count; ++i) data[i] = Value(r, k, i);
    }
  }
  // Every element equals the expected average over `size` ranks (or this rank's own values).
  bool Holds(int size, bool reduced) const {
    for (size_t k = 0; k < views.size(); ++k) {
      const auto* data = static_cast<const float*>(views[k].data);
      for (size_t i = 0; i < views[k].count; ++i) {
        float expected = Value(rank, k, i);
        if (reduced) {
          float sum = 0;
          for (int r = 0; r < size; ++r) sum += Value(r, k, i);
          expected = sum / static_cast<float>(size);
        }
        if (data[i] != expected) {
          std::fprintf(stderr, "rank %d: g%zu[%zu] = %g, expected %g\n", rank, k, i, data[i],
                       expected);
          return false;
        }
      }
    }
    return true;
  }
};

void TestBucketsAndAverages(weft::Communicator* comm) {
  const int size = comm->size();
  // 4-byte floats: with a 64-byte first bucket and 256-byte buckets this makes several buckets,
  // some in place, some packed, and one gradient larger than the cap.
  const std::vector<size_t> counts = {10, 3, 100, 20, 20, 5, 8, 16, 30, 2};
  Grads grads(counts, 6);
  weft::shard::GradReducerOptions options;
  options.first_bucket_cap_bytes = 64;
  options.bucket_cap_bytes = 256;
  auto reducer = weft::shard::GradReducer::Create(comm, grads.views, options);
  CheckOk(reducer.status(), "Create");
  if (!reducer.ok()) return;
  weft::shard::GradReducer& red = **reducer;
  const weft::shard::BucketPlan& plan = red.plan();
  Check(plan.num_buckets() >= 4, absl::StrCat("expected >= 4 buckets, got ", plan.num_buckets()));
  // Reverse registration order: the first bucket starts with the last gradient.
  Check(plan.bucket(0).members.front() == counts.size() - 1,
        "bucket 0 must start with the last gradient");
  size_t covered = 0;
  for (int b = 0; b < plan.num_buckets(); ++b) covered += plan.bucket(b).members.size();
  Check(covered == counts.size(), "buckets must cover every gradient once");

  for (int pass = 0; pass < 3; ++pass) {
    grads.Fill(rank);
    red.BeginBackward(/*sync=*/true);
    // Pass 0: reverse order (as backward produces). Pass 1: forward order, so nothing is issued
    // until the end. Pass 2: a rank-dependent order: buckets must still be issued identically.
    std::vector<size_t> order(counts.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = counts.size() - 1 - k;
    if (pass == 1) std::reverse(order.begin(), order.end());
    if (pass == 2) std::rotate(order.begin(), order.begin() + rank % order.size(), order.end());
    int issued_before = 0;
    for (size_t n = 0; n < order.size(); ++n) {
      CheckOk(red.MarkReady(order[n]), "MarkReady");
      if (pass == 0 && n == plan.bucket(0).members.size() - 1) issued_before = red.buckets_issued();
    }
    if (pass == 0) {
      // The first bucket's all-reduce starts the moment its last gradient is ready.
      Check(issued_before == 1,
            absl::StrCat("bucket 0 not issued when complete (issued ", issued_before, ")"));
    }
    Check(red.buckets_issued() == plan.num_buckets(), "every bucket issued once all are ready");
    CheckOk(red.Finish(Scaled(absl::Seconds(30))), "Finish");
    Check(grads.Holds(size, true), absl::StrCat("pass ", pass, ": averages"));
  }

  // no_sync: nothing is communicated, gradients keep their local values.
  grads.Fill(rank);
  red.BeginBackward(/*sync=*/false);
  for (size_t k = 0; k < counts.size(); ++k) CheckOk(red.MarkReady(k), "MarkReady no_sync");
  Check(red.buckets_issued() == 0, "no_sync must issue nothing");
  CheckOk(red.Finish(Scaled(absl::Seconds(30))), "Finish no_sync");
  Check(grads.Holds(size, false), "no_sync keeps local gradients");

  // Misuse is reported, naming the gradient.
  red.BeginBackward(/*sync=*/false);
  CheckOk(red.MarkReady(2), "MarkReady");
  absl::Status twice = red.MarkReady(2);
  Check(absl::IsFailedPrecondition(twice) && absl::StrContains(twice.message(), "\"g2\"") &&
            absl::StrContains(twice.message(), "twice"),
        absl::StrCat("double mark: ", twice.ToString()));
  Check(absl::IsInvalidArgument(red.MarkReady(99)), "out-of-range index");
  absl::Status missing = red.Finish(absl::Seconds(1));
  Check(absl::StrContains(missing.message(), "never marked ready"),
        absl::StrCat("missing gradient: ", missing.ToString()));
  Check(absl::IsFailedPrecondition(red.MarkReady(0)), "MarkReady outside a pass");
}

// A 16-bit wire over contiguous and staged buckets: every element is the documented average of
// the ranks' rounded values; explicitly the gradients' own type, the plain average.
void TestWireTypes(weft::Communicator* comm) {
  std::vector<int> all(comm->size());
  for (int r = 0; r < comm->size(); ++r) all[r] = r;
  const std::vector<size_t> counts = {10, 3, 100, 20, 20, 5, 8, 16, 30, 2};
  size_t elements = 0;
  for (size_t n : counts) elements += n;
  for (DataType wire : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const std::string name = weft::Name(wire);
    Grads grads(counts, 6);
    weft::shard::GradReducerOptions options;
    options.first_bucket_cap_bytes = 64;
    options.bucket_cap_bytes = 256;
    options.wire_type = wire;
    auto reducer = weft::shard::GradReducer::Create(comm, grads.views, options);
    CheckOk(reducer.status(), absl::StrCat("Create, wire ", name));
    if (!reducer.ok()) continue;
    weft::shard::GradReducer& red = **reducer;
    Check(red.wire_type() == wire, absl::StrCat("wire_type() for ", name));
    size_t staged = 0, contiguous = 0, staged_bytes = 0;
    for (int b = 0; b < red.plan().num_buckets(); ++b) {
      const weft::shard::Bucket& bucket = red.plan().bucket(b);
      ++(bucket.contiguous != nullptr ? contiguous : staged);
      if (bucket.contiguous == nullptr) staged_bytes += bucket.bytes;
    }
    Check(staged > 0 && contiguous > 0, "the plan must hold contiguous and staged buckets");
    // The gradients' own type stages the packed buckets; a 16-bit wire every element, 2 bytes.
    const size_t staging = wire == DataType::kFloat32 ? staged_bytes : 2 * elements;
    Check(red.staging_bytes() == staging,
          absl::StrCat(name, ": staging_bytes ", red.staging_bytes(), ", expected ", staging));
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < counts.size(); ++k) {
        auto* data = static_cast<float*>(grads.views[k].data);
        for (size_t i = 0; i < counts[k]; ++i) data[i] = weft::testing::WireValue(rank, k, i);
      }
      red.BeginBackward(/*sync=*/true);
      for (size_t k = counts.size(); k-- > 0;) CheckOk(red.MarkReady(k), "MarkReady");
      CheckOk(red.Finish(Scaled(absl::Seconds(30))), absl::StrCat("Finish, wire ", name));
      int wrong = 0;
      for (size_t k = 0; k < counts.size(); ++k) {
        const auto* data = static_cast<const float*>(grads.views[k].data);
        for (size_t i = 0; i < counts[k]; ++i) {
          const float expected = weft::testing::WireAverage(wire, all, k, i);
          if (data[i] != expected && wrong++ < 4) {
            std::fprintf(stderr, "rank %d: wire %s: g%zu[%zu] = %a, expected %a\n", rank,
                         name.c_str(), k, i, data[i], expected);
          }
        }
      }
      Check(wrong == 0, absl::StrCat("wire ", name, ", pass ", pass, ": ", wrong, " wrong"));
    }
  }
}

// A rank asking for another wire type than its peers fails on every rank; a wire type that is
// neither the gradients' nor a 16-bit float is refused, named.
void TestWireMisuse(weft::Communicator* comm) {
  Grads grads({16, 16}, 2);
  weft::shard::GradReducerOptions options;
  for (DataType bad : {DataType::kInt32, DataType::kFloat64, static_cast<DataType>(42)}) {
    options.wire_type = bad;
    auto reducer = weft::shard::GradReducer::Create(comm, grads.views, options);
    Check(absl::IsInvalidArgument(reducer.status()) &&
              absl::StrContains(reducer.status().message(), weft::Name(bad)),
          absl::StrCat("invalid wire type ", weft::Name(bad), ": ", reducer.status().ToString()));
  }
  options.type = DataType::kFloat64;  // 16-bit wires are for float gradients only
  options.wire_type = DataType::kBFloat16;
  auto wide = weft::shard::GradReducer::Create(comm, grads.views, options);
  Check(absl::IsInvalidArgument(wide.status()) &&
            absl::StrContains(wide.status().message(), "bfloat16"),
        absl::StrCat("bf16 wire for double gradients: ", wide.status().ToString()));
  if (comm->size() < 2) return;
  options.type = DataType::kFloat32;
  options.wire_type = rank == 1 ? DataType::kFloat16 : DataType::kBFloat16;
  auto reducer = weft::shard::GradReducer::Create(comm, grads.views, options);
  // Every rank sees rank 1 (or rank 1 sees rank 0) differ, and the message names both types.
  const std::string types =
      rank == 1 ? "wire half here, bfloat16 there" : "wire bfloat16 here, half there";
  Check(
      absl::IsFailedPrecondition(reducer.status()) &&
          absl::StrContains(reducer.status().message(), "differs from rank") &&
          absl::StrContains(reducer.status().message(), types),
      absl::StrCat("mismatched wire types must fail on every rank: ", reducer.status().ToString()));
}

void TestPlanMismatch(weft::Communicator* comm) {
  if (comm->size() < 2) return;
  std::vector<size_t> counts = {4, 4, 4};
  if (rank == 1) counts[1] = 5;
  Grads grads(counts, 3);
  auto reducer = weft::shard::GradReducer::Create(comm, grads.views);
  Check(!reducer.ok() && absl::StrContains(reducer.status().message(), "differs from rank"),
        absl::StrCat("mismatched plans must fail on every rank: ", reducer.status().ToString()));
}

void TestDeadline(weft::Communicator* comm) {
  if (comm->size() < 2) return;
  Grads grads({64}, 1);
  auto reducer = weft::shard::GradReducer::Create(comm, grads.views);
  CheckOk(reducer.status(), "Create");
  if (!reducer.ok()) return;
  grads.Fill(rank);
  (*reducer)->BeginBackward(true);
  // Rank 1 is late: rank 0's Finish must give up at its deadline, not hang. Scaled: on a loaded
  // machine rank 0 may take long to reach Finish, and rank 1 must still come after its deadline.
  if (rank == 1) usleep(static_cast<useconds_t>(800 * 1000 * TimeScale()));
  CheckOk((*reducer)->MarkReady(0), "MarkReady");
  const absl::Duration timeout = rank == 0 ? absl::Milliseconds(100) : Scaled(absl::Seconds(30));
  absl::Status s = (*reducer)->Finish(timeout);
  if (rank == 0) {
    Check(absl::IsDeadlineExceeded(s) && absl::StrContains(s.message(), "not reduced within"),
          absl::StrCat("late peer: ", s.ToString()));
  } else {
    CheckOk(s, "Finish (late rank)");
  }
  // The destructor waits for the bucket still in flight; then everyone meets.
  reducer->reset();
  CheckOk(comm->Barrier().Wait(Scaled(absl::Seconds(30))), "Barrier");
}

}  // namespace

int main() {
  alarm(static_cast<unsigned>(
      60 * TimeScale()));  // a hung collective fails the test instead of hanging it
  auto comm = weft::Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "communicator: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  rank = (*comm)->rank();
  TestBucketsAndAverages(comm->get());
  TestWireTypes(comm->get());
  TestWireMisuse(comm->get());
  TestPlanMismatch(comm->get());
  TestDeadline(comm->get());
  if (failures == 0 && rank == 0) std::printf("grad_reducer_worker: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
