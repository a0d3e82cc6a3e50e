// One rank of the ZeroReducer wire-type tests (started by weftrun from grad_reducer_test). Exits 0
// when every check passed; otherwise prints what differed and exits 1.
//
// For stages 1, 2 and 3, over every rank and hybrid (two shard groups of half the ranks, their
// slices all-reduced across the replicas), with fp32, fp16 and bf16 wires: each GradSlice(u)
// element is the documented average of reducer_checks.h's values, bit for bit, and bytes_sent()
// counts the gradient collectives at the wire's width.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "reducer_checks.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"
#include "weft/kernels/dtype.h"
#include "weft/shard/flat_buffer.h"
#include "weft/shard/shard_layout.h"
#include "weft/shard/zero_reducer.h"

namespace weft::testing {
namespace {

// Where this rank sits: its shard group (the communicator the layout is over) and, under hybrid
// sharding, its replicas; the global ranks of both, in their communicators' rank order.
struct Groups {
  weft::Communicator* shards = nullptr;
  weft::Communicator* replicas = nullptr;
  std::vector<int> shard_ranks;  // global ranks of this rank's shard group
  std::vector<int> replica_of;   // per replica, the global rank of its shard group's rank 0
  std::unique_ptr<weft::Communicator> split_shards, split_replicas;
};

absl::Status MakeGroups(weft::Communicator* comm, bool hybrid, Groups& g) {
  const int size = comm->size();
  const int k = hybrid ? size / 2 : size;  // ranks per shard group
  for (int t = 0; t < k; ++t) g.shard_ranks.push_back(rank / k * k + t);
  for (int c = 0; c < size / k; ++c) g.replica_of.push_back(c * k);
  g.shards = comm;
  if (!hybrid) return absl::OkStatus();
  auto shards = comm->Split(rank / k, rank);
  if (!shards.ok()) return shards.status();
  auto replicas = comm->Split(rank % k, rank);
  if (!replicas.ok()) return replicas.status();
  g.split_shards = *std::move(shards);
  g.split_replicas = *std::move(replicas);
  g.shards = g.split_shards.get();
  g.replicas = g.split_replicas.get();
  return absl::OkStatus();
}

// Element i of unit u, averaged in the shard group and then across the replicas, both in `wire`.
float Expected(DataType wire, const Groups& g, int u, size_t i) {
  std::vector<float> groups;
  for (int first : g.replica_of) {
    std::vector<int> members;
    for (int t = 0; t < static_cast<int>(g.shard_ranks.size()); ++t) members.push_back(first + t);
    groups.push_back(WireAverage(wire, members, u, i));
  }
  return g.replicas == nullptr ? groups[0] : AverageIn(wire, groups);
}

void TestStage(weft::Communicator* comm, int stage, bool hybrid, DataType wire) {
  const std::string what =
      absl::StrCat("stage ", stage, hybrid ? " hybrid" : "", ", wire ", weft::Name(wire));
  Groups g;
  CheckOk(MakeGroups(comm, hybrid, g), absl::StrCat(what, ": splitting"));
  if (g.shards == nullptr) return;
  const int k = g.shards->size();
  std::vector<weft::shard::Unit> units;
  size_t total = 0;
  for (size_t n : {40, 100, 16}) {
    const size_t length = weft::shard::ShardLayout::PaddedLength(n, k);
    units.push_back({absl::StrCat("unit", units.size()), total, length});
    total += length;
  }
  auto layout = weft::shard::ShardLayout::Create(units, k);
  CheckOk(layout.status(), absl::StrCat(what, ": layout"));
  if (!layout.ok()) return;
  weft::shard::FlatBuffer grads(total), params(total);
  weft::shard::ZeroOptions options;
  options.stage = stage;
  options.replicas = g.replicas;
  options.wire_type = wire;
  options.timeout = Scaled(absl::Seconds(30));
  auto zero = weft::shard::ZeroReducer::Create(g.shards, *layout, &grads, &params, options);
  CheckOk(zero.status(), absl::StrCat(what, ": Create"));
  if (!zero.ok()) return;
  weft::shard::ZeroReducer& z = **zero;
  CheckOk(z.LoadShard(), absl::StrCat(what, ": LoadShard"));
  // Per pass: a ring reduce-scatter sends (k-1)/k of the unit, a replica all-reduce twice
  // (R-1)/R of the slice, both at the wire's width.
  uint64_t per_pass = 0;
  for (int u = 0; u < layout->num_units(); ++u) {
    per_pass += layout->slice(u) * (k - 1) * weft::SizeOf(wire);
    if (g.replicas == nullptr) continue;
    const int replicas = g.replicas->size();
    per_pass += 2 * layout->slice(u) * (replicas - 1) / replicas * weft::SizeOf(wire);
  }
  const int me = g.shards->rank();
  for (int pass = 0; pass < 2; ++pass) {
    z.BeginBackward(/*sync=*/true);
    for (int u = layout->num_units() - 1; u >= 0; --u) {
      float* grad = z.GradientsFor(u);
      for (size_t i = 0; i < layout->unit(u).length; ++i) {
        grad[i] = WireValue(rank, u, i);
      }
      CheckOk(z.MarkUnitReady(u), absl::StrCat(what, ": MarkUnitReady"));
    }
    CheckOk(z.Finish(), absl::StrCat(what, ": Finish"));
    int wrong = 0;
    for (int u = 0; u < layout->num_units(); ++u) {
      const float* slice = z.GradSlice(u);
      for (size_t j = 0; j < layout->slice(u); ++j) {
        const size_t i = static_cast<size_t>(me) * layout->slice(u) + j;
        const float expected = Expected(wire, g, u, i);
        if (slice[j] != expected && wrong++ < 4) {
          std::fprintf(stderr, "rank %d: %s: unit%d[%zu] = %a, expected %a\n", rank, what.c_str(),
                       u, i, slice[j], expected);
        }
      }
    }
    Check(wrong == 0, absl::StrCat(what, ", pass ", pass, ": ", wrong, " wrong"));
    Check(
        z.bytes_sent() == (pass + 1) * per_pass,
        absl::StrCat(what, ": bytes_sent ", z.bytes_sent(), ", expected ", (pass + 1) * per_pass));
  }
  Check((z.peak_wire_bytes() > 0) == (wire != DataType::kFloat32),
        absl::StrCat(what, ": peak_wire_bytes ", z.peak_wire_bytes()));
}

// A rank asking for another wire type than its peers fails on every rank; a wire type other than
// float, half or bfloat16 is refused, named.
void TestMisuse(weft::Communicator* comm) {
  auto layout = weft::shard::ShardLayout::Create(
      {{"unit", 0, weft::shard::ShardLayout::PaddedLength(16, comm->size())}}, comm->size());
  CheckOk(layout.status(), "layout");
  if (!layout.ok()) return;
  weft::shard::FlatBuffer grads(layout->total()), params(layout->total());
  weft::shard::ZeroOptions options;
  options.timeout = Scaled(absl::Seconds(30));
  for (DataType bad : {DataType::kFloat64, DataType::kInt8, static_cast<DataType>(42)}) {
    options.wire_type = bad;
    auto zero = weft::shard::ZeroReducer::Create(comm, *layout, &grads, &params, options);
    Check(absl::IsInvalidArgument(zero.status()) &&
              absl::StrContains(zero.status().message(), weft::Name(bad)),
          absl::StrCat("invalid wire type ", weft::Name(bad), ": ", zero.status().ToString()));
  }
  if (comm->size() < 2) return;
  options.wire_type = rank == 1 ? DataType::kBFloat16 : DataType::kFloat16;
  auto zero = weft::shard::ZeroReducer::Create(comm, *layout, &grads, &params, options);
  // Every rank sees rank 1 (or rank 1 sees rank 0) differ, and the message names both types.
  const std::string types =
      rank == 1 ? "wire bfloat16 here, half there" : "wire half here, bfloat16 there";
  Check(absl::IsFailedPrecondition(zero.status()) &&
            absl::StrContains(zero.status().message(), "differs from rank") &&
            absl::StrContains(zero.status().message(), types),
        absl::StrCat("mismatched wire types must fail on every rank: ", zero.status().ToString()));
}

int Main() {
  // A hung collective fails the test instead of hanging it.
  alarm(static_cast<unsigned>(60 * TimeScale()));
  auto comm = weft::Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "communicator: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  rank = (*comm)->rank();
  for (int stage = 1; stage <= 3; ++stage) {
    for (bool hybrid : {false, true}) {
      if (hybrid && (*comm)->size() % 2 != 0) continue;
      for (DataType wire : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        TestStage(comm->get(), stage, hybrid, wire);
      }
    }
  }
  TestMisuse(comm->get());
  if (failures == 0 && rank == 0) std::printf("zero_wire_worker: all checks passed\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace weft::testing

int main() { return weft::testing::Main(); }
