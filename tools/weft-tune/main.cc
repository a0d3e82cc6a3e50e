// weft-tune: calibrates the tuner's cost model on the machine it runs on, offline.
//
//   weftrun -n N weft-tune --out FILE [--samples K]
//
// Every rank takes part; rank 0 writes FILE in the format WEFT_TUNING_FILE reads (tuner_model.h).
// It measures, with collectives forced on sub-communicators (CommOptions::algorithm):
//   reduce.gbps   the reduction kernel, on rank 0;
//   shm.Q         ring all-reduces inside every node at once (Q ranks per node);
//   net.N         ring all-reduces across the N nodes in every lane at once;
//   net_flow.N    ring all-reduces over every rank, numbered node by node: one message on each
//                 node's link at a time while every rank works, as a flat ring across nodes
//                 runs (its slowest step is the crossing);
//   shm_direct.C.P, cma_direct.C.P
//                 each direct collective C over all P ranks, where they share one host.
// A ring class is fitted from a small and a large all-reduce (the small one gives alpha, what the
// large one adds the bandwidth); a direct class from a small and a large collective. Each sample
// is a loop of runs timed on every rank, the slowest rank's time counting; the median of the
// samples is kept. Nothing is measured at communicator creation: a job reads the file or uses
// the built-in defaults. Exit status: 0 with the file written, 1 on a failure, 2 on a usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/tuner_model.h"
#include "weft/comm/communicator.h"
#include "weft/kernels/reduce.h"
#include "weft/topology/host.h"

namespace weft::tune {
namespace {

constexpr char kUsage[] =
    "Usage: weftrun -n N weft-tune --out FILE [--samples K]\n"
    "Measures this machine's alpha-beta costs and writes them to FILE for WEFT_TUNING_FILE.\n";

constexpr size_t kSmallBytes = 256;
constexpr size_t kLargeBytes = 4 << 20;
constexpr int kSmallRuns = 64;
constexpr int kLargeRuns = 4;
constexpr const char* kDirectCollectives[] = {"all_reduce", "reduce_scatter", "all_gather",
                                              "broadcast"};

using Clock = std::chrono::steady_clock;

// Page-aligned floats, as frameworks align tensors: a misaligned buffer makes every line a
// collective writes straddle two.
struct Buffer {
  explicit Buffer(size_t bytes)
      : data(static_cast<float*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {
    std::fill_n(data.get(), bytes / sizeof(float), 1.0f);
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
};

// One run of `collective` over `comm` with `bytes` in all (the tuner's bytes: tuner.h).
absl::Status RunOnce(Communicator& comm, const std::string& collective, size_t bytes, float* in,
                     float* out) {
  const size_t floats = std::max<size_t>(1, bytes / sizeof(float));
  const size_t block = std::max<size_t>(1, floats / comm.size());
  if (collective == "all_reduce") {
    return comm.AllReduce(in, out, floats, DataType::kFloat32, ReduceOp::kMax).Wait();
  }
  if (collective == "reduce_scatter") {
    return comm.ReduceScatter(in, out, block, DataType::kFloat32, ReduceOp::kMax).Wait();
  }
  if (collective == "all_gather") {
    return comm.AllGather(in, out, block, DataType::kFloat32).Wait();
  }
  return comm.Broadcast(in, out, floats, DataType::kFloat32, 0).Wait();
}

// The median over `samples` of a loop's seconds per run, the slowest rank's of each loop.
absl::StatusOr<double> Time(Communicator& comm, const std::string& collective, size_t bytes,
                            int samples) {
  Buffer in(kLargeBytes), out(kLargeBytes);
  const int runs = bytes <= kSmallBytes ? kSmallRuns : kLargeRuns;
  std::vector<double> times;
  for (int s = 0; s < samples + 1; ++s) {  // the first warms the buffers and links
    if (absl::Status st = comm.Barrier().Wait(); !st.ok()) return st;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < runs; ++i) {
      if (absl::Status st = RunOnce(comm, collective, bytes, in.data.get(), out.data.get());
          !st.ok()) {
        return st;
      }
    }
    double seconds = std::chrono::duration<double>(Clock::now() - start).count() / runs;
    if (absl::Status st =
            comm.AllReduce(&seconds, &seconds, 1, DataType::kFloat64, ReduceOp::kMax).Wait();
        !st.ok()) {
      return st;
    }
    if (s > 0) times.push_back(seconds);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// A ring over q ranks takes 2(q-1) alphas small and adds (q-1)/q n (2 beta + gamma) large.
LinkCost FitRing(double small, double large, int q, double gamma) {
  const double n = static_cast<double>(kLargeBytes - kSmallBytes);
  const double share = (q - 1.0) / q;
  const double beta = std::max((std::max(large - small, 1e-9) / (share * n) - gamma) / 2, 1e-12);
  return {std::max(0.05, small / (2 * (q - 1)) * 1e6), 1 / beta / 1e9};
}

// A whole collective: its time small is alpha, what the bytes add the bandwidth.
LinkCost FitDirect(double small, double large) {
  const double n = static_cast<double>(kLargeBytes - kSmallBytes);
  return {std::max(0.05, small * 1e6), n / std::max(large - small, 1e-9) / 1e9};
}

double MeasureReduceGbps() {
  Buffer dst(kLargeBytes), src(kLargeBytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point start = Clock::now();
    ReduceInto(DataType::kFloat32, ReduceOp::kMax, dst.data.get(), src.data.get(),
               kLargeBytes / sizeof(float));
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return kLargeBytes / best / 1e9;
}

// This rank's node and its rank inside it, numbered in rank order; and the node count.
struct Place {
  int node = 0, local = 0, nodes = 0, node_size = 0;
};

absl::StatusOr<Place> Locate(Communicator& comm) {
  const uint64_t mine = std::hash<std::string>()(HostIdentity());
  std::vector<uint64_t> hosts(comm.size());
  if (absl::Status s = comm.AllGather(&mine, hosts.data(), 1, DataType::kUint64).Wait(); !s.ok()) {
    return s;
  }
  Place place;
  std::vector<uint64_t> seen;
  for (int r = 0; r < comm.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), hosts[r]);
    if (it == seen.end()) it = seen.insert(seen.end(), hosts[r]);
    if (r == comm.rank()) place.node = static_cast<int>(it - seen.begin());
    if (hosts[r] != mine) continue;
    ++place.node_size;
    if (r < comm.rank()) ++place.local;
  }
  place.nodes = static_cast<int>(seen.size());
  return place;
}

// Measures a ring class on the sub-communicator of this rank's `color`; every rank calls it.
absl::Status MeasureRing(Communicator& comm, int color, const char* name, int group_key,
                         int samples, double gamma, CostModel& model) {
  CommOptions ring;
  ring.algorithm = "ring";
  absl::StatusOr<std::unique_ptr<Communicator>> sub = comm.Split(color, comm.rank(), ring);
  if (!sub.ok()) return sub.status();
  double fit[2] = {0, 0};
  int q = (*sub)->size();
  if (q > 1) {
    absl::StatusOr<double> small = Time(**sub, "all_reduce", kSmallBytes, samples);
    absl::StatusOr<double> large = Time(**sub, "all_reduce", kLargeBytes, samples);
    if (!small.ok()) return small.status();
    if (!large.ok()) return large.status();
    const LinkCost cost = FitRing(*small, *large, q, gamma);
    fit[0] = cost.alpha_us;
    fit[1] = cost.gbps;
  }
  // Rank 0 keeps its group's fit (every group runs at once and alike).
  if (comm.rank() == 0 && q > 1) model.Set(name, group_key, {fit[0], fit[1]});
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  std::string out;
  int samples = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool valued = i + 1 < argc;
    if (arg == "--out" && valued) {
      out = argv[++i];
      continue;
    }
    if (arg != "--samples" || !valued || !absl::SimpleAtoi(argv[++i], &samples) || samples < 1) {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (out.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "weft-tune: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  Communicator& world = **comm;
  auto fail = [&](const absl::Status& s, const std::string& during) {
    std::fprintf(stderr, "weft-tune: rank %d: %s: %s\n", world.rank(), during.c_str(),
                 s.ToString().c_str());
    return 1;
  };
  absl::StatusOr<Place> place = Locate(world);
  if (!place.ok()) return fail(place.status(), "locating the ranks");
  CostModel model;
  model.set_reduce_gbps(MeasureReduceGbps());
  if (absl::Status s =
          MeasureRing(world, place->node, "shm", place->node_size, samples, model.gamma(), model);
      !s.ok()) {
    return fail(s, "measuring shm");
  }
  if (place->nodes > 1) {
    if (absl::Status s =
            MeasureRing(world, place->local, "net", place->nodes, samples, model.gamma(), model);
        !s.ok()) {
      return fail(s, "measuring net");
    }
    if (absl::Status s =
            MeasureRing(world, 0, CostModel::kNetFlow, place->nodes, samples, model.gamma(), model);
        !s.ok()) {
      return fail(s, "measuring net_flow");
    }
  }
  if (place->nodes == 1 && world.size() > 1) {
    for (const char* algorithm : {"shm_direct", "cma_direct"}) {
      CommOptions forced;
      forced.algorithm = algorithm;
      absl::StatusOr<std::unique_ptr<Communicator>> sub = world.Split(0, world.rank(), forced);
      if (!sub.ok()) {  // cma_direct where cross-memory attach is denied: its default stands
        if (world.rank() == 0) {
          std::fprintf(stderr, "weft-tune: %s skipped: %s\n", algorithm,
                       sub.status().ToString().c_str());
        }
        continue;
      }
      for (const char* collective : kDirectCollectives) {
        absl::StatusOr<double> small = Time(**sub, collective, kSmallBytes, samples);
        absl::StatusOr<double> large = Time(**sub, collective, kLargeBytes, samples);
        if (!small.ok()) return fail(small.status(), absl::StrCat(algorithm, " ", collective));
        if (!large.ok()) return fail(large.status(), absl::StrCat(algorithm, " ", collective));
        model.Set(CostModel::CollectiveClass(algorithm, collective), world.size(),
                  FitDirect(*small, *large));
      }
    }
  }
  if (world.rank() != 0) return 0;
  std::ofstream file(out);
  file << model.Format();
  if (!file.flush()) {
    std::fprintf(stderr, "weft-tune: writing %s: %s\n", out.c_str(), std::strerror(errno));
    return 1;
  }
  std::printf("weft-tune: wrote %s (%d ranks, %d nodes); use it with WEFT_TUNING_FILE=%s\n",
              out.c_str(), world.size(), place->nodes, out.c_str());
  return 0;
}

}  // namespace
}  // namespace weft::tune

int main(int argc, char** argv) { return weft::tune::Run(argc, argv); }
