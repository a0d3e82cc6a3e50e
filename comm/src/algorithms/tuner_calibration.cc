#include "algorithms/tuner_calibration.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "algorithms/algorithm.h"
#include "algorithms/hierarchical_group.h"
#include "log.h"
#include "weft/comm/shared_memory.h"
#include "weft/kernels/reduce.h"
#include "weft/topology/host.h"

namespace weft {
namespace {

// The ring classes are timed on all-reduces of a small and a large buffer: the small one gives
// alpha, what the large one adds gives the bandwidth. Each direct algorithm's collectives are
// timed at sizes from a fixed cost to past the last-level cache, with points where the
// algorithms' curves bend (L1, L2, the last-level cache): their crossings lie in between. They
// run out of place, as benchmarks and most large collectives run them (in the caches and in
// place the algorithms look alike, beyond they do not). The probes take turns, round after
// round, so that a busy machine slows them alike and their comparison stays fair. Over several
// nodes every algorithm over links is also timed whole at two sizes, its anchors (tuner_model.h):
// the small size, and 8 KiB (broadcasts at a third: see kRoundsLargeAnchor). Up to there a
// network's fixed costs outweigh its bytes, and a loop of such collectives stays within what the
// network-namespace rig's shaped links let pass at once (so calibration and a benchmark's loop see
// the same link); beyond, the formulas' bandwidths take over. shm_direct and cma_direct cross
// between 32 and 512 KiB; with a straight line between those two points, session 7's checks
// measured the pick 1.16-1.19x slower than the other algorithm at 128 KiB, hence a point there. The
// all-gathers cross again between 512 KiB and 2 MiB: interpolated, session 10 picked shm_direct at
// 1 MiB (95.2 against 95.4 us predicted), which took 92-107 us against cma_direct's 71-85, hence a
// point at 1 MiB.
constexpr size_t kSmallBytes = 256;
constexpr size_t kLargeBytes = 2 << 20;
constexpr size_t kDirectSizes[] = {kSmallBytes, 32 << 10, 128 << 10, 512 << 10,
                                   1 << 20,     2 << 20,  8 << 20,   32 << 20};
constexpr size_t kDirectLargeBytes = std::end(kDirectSizes)[-1];
constexpr size_t kAnchorSizes[] = {kSmallBytes, 8 << 10};
constexpr size_t kAnchorLargeBytes = std::end(kAnchorSizes)[-1];
// Broadcasts also get an anchor at kLargeBytes. The network classes come from ring all-reduces,
// which keep each link busy both ways at once; a broadcast sends one way, and its phases leave the
// link idle in different places (the hierarchy's node phases, the tree's forwarding inside a
// node). On the rig (1 Gbit/s tbf, 2 nodes x 2 ranks) the formulas priced the 2 MiB broadcast at
// 17.3 ms by the tree and 18.6 by the hierarchy, and the two took 14.2-14.6 and 11.0-11.1 in three
// checks: the tree picked, 1.3x slower. The anchor is timed in the last rounds, after a warm run
// that spends what the link let build up while the small probes ran, as a benchmark's warm-up does.
constexpr int kRoundsLargeAnchor = 3;
constexpr int kLargeAnchorRuns = 2;
constexpr int kRounds = 6;
// The largest direct size is timed in the last rounds only: it costs more than all the others.
// Its median decides every larger collective, so it takes five samples. With three, two fresh
// calibrations in session 10's three side-by-side runs priced shm_direct's 32 MiB all-reduce
// above cma_direct's (12.6 and 13.1 against 11.1 ms; in a benchmark's loop 8.7-13.0 against
// 12.3-15.6) and ran the 256 MiB all-reduce 1.3x slower than it could; with two, the median was
// the slower sample. Five cost 0.3 s more calibration.
constexpr int kRoundsPastCaches = 5;
// Small sizes (the ring's, and a direct collective's below kWarmedBytes) give kSmallRuns samples
// a round: their medians shrug off the samples that waited for a late peer. Each sample is
// kSmallLoopRuns runs in a row, as a benchmark's loop runs them. A lone broadcast times only
// where its root happened to find the others (it never waits for them, except for the round
// before last), which made the root's samples swing 0.3-2.8 us at 256 B from one calibration to
// the next. A lone ring over ranks that share cores (the network-namespace rig: 4 ranks, 2 cores)
// times wherever the scheduler put its peers: the rig's network latency came out anywhere from
// 33 to 390 us in six calibrations, and its shared memory's from 4.5 to 86 us; as loops, 19-47 and
// 2.3-6.0 us. Larger direct sizes run once to warm the buffers, then DirectRuns(bytes) times in a
// row timed as one sample, as a benchmark's loop runs them (8 MiB still fits the last-level
// cache, so a cold run says little). A short loop is no loop: on an AMD EPYC VM three runs of
// shm_direct at 512 KiB-2 MiB took twice what a benchmark's loop of a hundred took per run
// (all-reduce 2 MiB 313-328 us against 179, broadcast 286-334 against 165), cma_direct's 1.5x,
// and the tuner picked cma_direct where it was 1.2-1.7x slower; sixteen came within 1.0-1.3x.
// The largest, past the caches (two ranks' 32 MiB outputs and inputs overflow this machine's
// 48 MiB), runs kDirectRunsPastCaches times, warmed only once: there the algorithms stream from
// memory and rank differently than at 8 MiB (all-gather: shm_direct 25-40% ahead of cma_direct
// from 32 MiB on, a tie at 8 MiB). The ring's large size runs once.
constexpr int kSmallRuns = 4;
constexpr int kSmallLoopRuns = 8;
// A direct collective's small sample is a longer loop: its first run pays for the probe before
// it, which eight runs did not hide. With eight, four calibrations in a row priced shm_direct's
// 32 KiB all-gather at 4.3-6.2 us and cma_direct's at 3.3-4.9, where loops of 8192 ran them at
// 3.0-3.4 and 4.3-4.7 (5.0-5.5 and 6.6-7.2 in a slow state): the tuner picked cma_direct, 1.4x
// slower, and nothing contests a collective priced that low. With 64, four more calibrations
// priced shm_direct 0.8-0.9x cma_direct. A few microseconds each, they cost little; the rig's
// small rings, tens of microseconds a run over its shaped link, keep kSmallLoopRuns.
constexpr int kDirectSmallLoopRuns = 64;
constexpr size_t kWarmedBytes = 512 << 10;
// A warmed sample spans about kDirectSampleBytes, in kMinDirectRuns to kMaxDirectRuns runs.
constexpr size_t kDirectSampleBytes = 32 << 20;
constexpr int kMinDirectRuns = 3;
constexpr int kMaxDirectRuns = 16;
int DirectRuns(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>(kDirectSampleBytes / bytes, kMinDirectRuns, kMaxDirectRuns));
}
constexpr int kDirectRunsPastCaches = 2;
// A probe's envelopes in one round start at FirstEnvelope(round, slot): there are fewer than
// kProbeSlots probes, and each runs fewer than kRunsPerProbeRound times a round (a direct
// broadcast some 850), which RunProbes checks.
constexpr uint64_t kProbeSlots = 32;
constexpr uint64_t kRunsPerProbeRound = 1024;
constexpr uint64_t FirstEnvelope(int round, int slot) {
  return (static_cast<uint64_t>(round) * kProbeSlots + static_cast<uint64_t>(slot)) *
         kRunsPerProbeRound;
}
// A cached calibration is checked against the host as it is now: shm_direct's 1 MiB all-reduce,
// timed as calibration times it. A cache that prices it kDisturbedRatio times slower or more was
// measured while the host was disturbed, and its direct curves are measured again. On an AMD EPYC
// VM whose two vCPUs took 120-150 ns for a cross-core round trip most of the time and 600 ns in
// stretches of seconds, two calibrations in eight fell into such a stretch: shm_direct's 1 MiB
// all-reduce 364-466 us against 113-127, its 32 MiB all-gather 9.2-10.5 ms against 4.6-6.8,
// while cma_direct's curves hardly moved (8.0-10.5 ms). Cached, such a calibration ran every
// later job's large all-gathers on cma_direct, 1.7x slower than shm_direct. A cache that prices
// faster than the host runs now stands: the disturbance is now, not then.
//
// A host can also run in lasting states that rank the direct algorithms differently. That VM's
// cross-core round trip measured 50-75, 130-160 or 560-600 ns, for minutes on some days and a few
// seconds on others (the hypervisor moving its two vCPUs between cores that share less or more
// cache, it seems). So the cache keeps up to kMaxHostStates states, each as measured in it
// (AlternateCachePath): the recheck takes the state nearest the host as it runs now once the
// cache is over kDisturbedRatio off, and when none is within kDisturbedRatio the host is measured
// in its state now and that joins the others. The 1 MiB all-reduce told those states apart:
// about 75, 120 and 400 us. With room for two, the fastest state's measurement took the second
// place, and the slow state, the one that ranks the algorithms differently, found none.
//
// A host found slower than every state on file is measured only when it runs steadily and alone:
// the samples within kSteadySpread of each other, under kLastingStateRatio times the nearest
// price, and rank 0 on a core for at least kAloneCpuShare of the samples' time. A slow host thus
// costs one calibration per state, not one per job. In that VM's slow state the all-reduce took
// 3.2-3.9x its price in the middle state (353-449 us), on 99-100% of a core, samples within
// 1.15x; with one busy loop beside the two ranks, a steady 2.1-2.7x on 44-50% of a core (without
// the last rule, that loaded host was measured); with two, 130x. Measured in the slow state
// (three calibrations of 2.5-2.6 s), its cache priced cma_direct's broadcasts and all-gathers
// 1.0-2.2x below shm_direct's from 32 KiB to 32 MiB; measured in the middle one, shm_direct's
// were the cheaper by 1.3-1.5x from 512 KiB to 2 MiB. Samples warmed by a single run came out
// 1.4-1.6x slower first than next, hence a whole warm sample.
constexpr size_t kRecheckBytes = 1 << 20;
constexpr int kRecheckSamples = 3;
constexpr double kDisturbedRatio = 1.5;
constexpr double kLastingStateRatio = 6;
constexpr double kSteadySpread = 1.3;
constexpr double kAloneCpuShare = 0.9;
// A cached network class is checked too, once a process: a host's cache is named for the host and
// keyed by node count alone, and the same host may join jobs over another network, transport
// (WEFT_TRANSPORT) or link rate. On the rig, a cache written at another rate priced the net class
// at 0.32 GB/s, where the 1 Gbit/s link gave 0.065: every prediction across nodes came out
// 2.4-2.5x low, and picks that weigh the network against memory go wrong that way. Every lane
// times the net class's large ring at once, as calibration does, warmed once; kNetChangedRatio
// off either way, the network classes and the anchors are measured again.
constexpr int kNetRecheckSamples = 3;
constexpr double kNetChangedRatio = 1.5;
// A cache's first line names the revision of the algorithms it was measured with. A change that
// makes an algorithm faster or slower, or a new point that calibration measures, bumps it, so that
// caches measured before are measured again instead of pricing the algorithm as it was. Revision
// 2: shm_direct's moving windows (ArenaRounds::Begin) and its all-gather's own block copied first,
// 1.1-1.4x faster from 8 KiB to 2 MiB, where older caches kept the ring ahead. Revision 3: the
// broadcasts' anchor at kLargeBytes. Revision 4: the direct collectives' small samples as loops
// of kDirectSmallLoopRuns, where older caches priced shm_direct's 32 KiB all-gather too high.
// Revision 5: the anchors' small samples taken by turns (RunProbes), where older caches priced
// the hierarchy's small all-gathers and reduce-scatters on the rig below Rabenseifner's in about
// one calibration in three.
constexpr int kAlgorithmsRevision = 5;
constexpr char kRevisionKey[] = "weft.algorithms_revision ";
// Between the states rank 0 publishes: a line no model's text holds.
constexpr char kStateSeparator[] = "\n%% another state of this host\n";
constexpr AlgorithmId kDirectAlgorithms[] = {AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect};
constexpr AlgorithmId kLinkAlgorithms[] = {AlgorithmId::kHierarchical, AlgorithmId::kRabenseifner,
                                           AlgorithmId::kRecursiveDoubling, AlgorithmId::kRing,
                                           AlgorithmId::kTree};
constexpr OpKind kTimedCollectives[] = {OpKind::kAllReduce, OpKind::kReduceScatter,
                                        OpKind::kAllGather, OpKind::kBroadcast};
// A ring's anchor over p ranks takes 2(p-1) network latencies a run and calibration runs it some
// 400 times: past this size the anchors would cost seconds, and what they correct (hand-offs
// of a few tens of microseconds) matters less against the rings' own latencies.
constexpr int kMaxAnchoredRanks = 32;
constexpr size_t kReduceBytes = 4 << 20;
// Calibration takes about a second on an idle machine and many times that on a loaded or
// sanitized one, all of it within the communicator's creation deadline. With less time left
// (WEFT_TIMEOUT set low, as fault tests and impatient jobs do) a communicator prices with what the
// cache or the built-in defaults hold rather than fail to come up: a short timeout asks that hung
// collectives fail fast, not that creation does.
constexpr absl::Duration kCalibrationRoom = absl::Seconds(20);

using Clock = std::chrono::steady_clock;

// CPU time this process has run, all threads together.
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

double Median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// The floats per rank of a `kind` collective of `bytes` in all (the tuner's bytes: see tuner.h).
size_t FloatsPerRank(OpKind kind, size_t bytes, int ranks) {
  const size_t floats = bytes / sizeof(float);
  const bool blocks = kind == OpKind::kReduceScatter || kind == OpKind::kAllGather;
  return std::max<size_t>(1, blocks ? floats / ranks : floats);
}

// One timing run: a ring all-reduce over a group (shm, net), or an algorithm's collective over
// the whole communicator (a direct algorithm's curve, or a link algorithm's anchor).
struct Probe {
  std::string name;  // the model's class
  int ranks = 0;     // the group size the entry is kept for
  RankGroup group;   // for the ring classes
  std::optional<AlgorithmId> algorithm;
  OpKind kind = OpKind::kAllReduce;
  int slot = 0;         // shm 0, net 1, net_flow 2, the others 3.. : the same on every rank
  bool shared = false;  // a direct algorithm over buffers from AllocShared
  std::map<size_t, std::vector<double>> seconds = {};  // per size, the runs that count
  // The ranks that must start each timed sample at once; empty for none. The net class's large
  // runs (every lane's ring shares the node's link) and every broadcast: its root depends on
  // nobody, so receivers that come late from the previous probe find its data already there,
  // and each rank timed less than a benchmark's loop takes after its barrier.
  RankGroup start_together = {};

  bool direct() const {
    return algorithm == AlgorithmId::kShmDirect || algorithm == AlgorithmId::kCmaDirect;
  }
  std::vector<size_t> Sizes() const {
    if (direct()) return {std::begin(kDirectSizes), std::end(kDirectSizes)};
    if (algorithm) {
      std::vector<size_t> sizes(std::begin(kAnchorSizes), std::end(kAnchorSizes));
      if (kind == OpKind::kBroadcast) sizes.push_back(kLargeBytes);
      return sizes;
    }
    return {kSmallBytes, kLargeBytes};
  }

  // The bytes a run of `bytes` really moves, once rounded to whole floats per rank.
  double Bytes(size_t bytes) const {
    const bool blocks = kind == OpKind::kReduceScatter || kind == OpKind::kAllGather;
    return static_cast<double>(FloatsPerRank(kind, bytes, ranks) * sizeof(float) *
                               (blocks ? ranks : 1));
  }

  // From the median runs (what a benchmark's average sees, unlike the luckiest run). A ring over
  // q ranks takes 2(q-1) alphas when small and adds (q-1)/q n (2 beta + gamma) when large.
  LinkCost FitLink(double gamma) const {
    const double small = Median(seconds.at(kSmallBytes)), large = Median(seconds.at(kLargeBytes));
    const double transfer = std::max(large - small, 1e-9);
    const double n = static_cast<double>(kLargeBytes - kSmallBytes);
    const double q = group.size();
    const double beta = std::max((transfer / ((q - 1) / q * n) - gamma) / 2, 1e-12);
    return LinkCost{std::max(0.05, small / (2 * (q - 1)) * 1e6), 1 / beta / 1e9};
  }
  // What FitLink's ring of kLargeBytes takes at `cost`.
  double RingLargeSeconds(const LinkCost& cost, double gamma) const {
    const double n = static_cast<double>(kLargeBytes - kSmallBytes);
    const double q = group.size();
    return 2 * (q - 1) * cost.alpha() + (q - 1) / q * n * (2 * cost.beta() + gamma);
  }
  // A collective of the whole communicator: its median time at each size.
  TimeCurve FitCurve() const {
    TimeCurve curve;
    for (const auto& [bytes, runs] : seconds) {
      curve.Set(static_cast<size_t>(Bytes(bytes)), std::max(0.05, Median(runs) * 1e6));
    }
    return curve;
  }
};

RankGroup Everyone(const Peers& peers) {
  RankGroup everyone{{}, peers.rank()};
  for (int r = 0; r < peers.size(); ++r) everyone.ranks.push_back(r);
  return everyone;
}

// Every lane's ranks (local rank < lanes) on every node: the net class's rings run at once.
RankGroup LaneHolders(const Peers& peers) {
  const NodeLayout& nodes = peers.nodes();
  RankGroup holders;
  for (int r = 0; r < peers.size(); ++r) {
    if (nodes.local_rank_of(r) >= nodes.lanes()) continue;
    if (r == peers.rank()) holders.me = holders.size();
    holders.ranks.push_back(r);
  }
  return holders;
}

// This rank's lane ring across nodes, the net class's probe (for a lane holder).
Probe NetProbe(const Peers& peers) {
  const NodeLayout& nodes = peers.nodes();
  return {"net",        nodes.num_nodes(),  {nodes.lane_group(nodes.local_rank()), nodes.node()},
          std::nullopt, OpKind::kAllReduce, 1};
}

// Readies the links for a calibration collective: `which` makes its envelope unique.
void BeginCalibration(Peers& peers, const CollectiveArgs& args, AlgorithmId algorithm,
                      uint64_t which, const Deadline& deadline) {
  // No user operation numbers this high.
  peers.Begin(MakeEnvelope(args, algorithm, ~uint64_t{0} - which), deadline);
}

// An all-reduce in place over `group` by the group ring, of `count` elements of `type`.
absl::Status GroupRingAllReduce(Peers& peers, const RankGroup& group, void* data, size_t count,
                                DataType type, ReduceOp op) {
  const Segments segments = Segments::Even(count, group.size(), SizeOf(type));
  auto* at = static_cast<std::byte*>(data);
  if (absl::Status s = GroupRingReduceScatter(peers, group, at, segments, type, op, 0); !s.ok()) {
    return s;
  }
  return GroupRingAllGather(peers, group, at, segments, group.size());
}

// Runs one collective of `bytes` for `probe`: the ring classes' all-reduce in place in `out`, an
// algorithm's collective from `in` into `out`; `which` makes its envelope unique.
absl::StatusOr<double> RunOne(Peers& peers, const Probe& probe, size_t bytes, const float* in,
                              float* out, uint64_t which, const Deadline& deadline) {
  CollectiveArgs args;
  args.kind = probe.kind;
  args.send = probe.algorithm ? in : out;
  args.recv = out;
  args.count = FloatsPerRank(probe.kind, bytes, probe.ranks);
  args.dtype = DataType::kFloat32;
  args.op = ReduceOp::kMax;  // keeps the values bounded across runs
  args.root = 0;
  const AlgorithmId algorithm = probe.algorithm.value_or(AlgorithmId::kRing);
  BeginCalibration(peers, args, algorithm, which, deadline);
  const Clock::time_point start = Clock::now();
  if (probe.algorithm) {
    if (absl::Status s = MakeAlgorithm(algorithm, peers, args)->Run(); !s.ok()) return s;
    return Since(start);
  }
  if (absl::Status s = GroupRingAllReduce(peers, probe.group, out, args.count, args.dtype, args.op);
      !s.ok()) {
    return s;
  }
  return Since(start);
}

// RunOne `runs` times back to back (envelopes from *which on), the time per run: as in a
// benchmark's loop, what one rank's run waits for the others' is spread over all of them.
absl::StatusOr<double> RunProbe(Peers& peers, const Probe& probe, size_t bytes, const float* in,
                                float* out, int runs, uint64_t* which, const Deadline& deadline) {
  double total = 0;
  for (int i = 0; i < runs; ++i) {
    absl::StatusOr<double> t = RunOne(peers, probe, bytes, in, out, (*which)++, deadline);
    if (!t.ok()) return t.status();
    total += *t;
  }
  return total / runs;
}

// Returns once every rank of `group` has called it: a ring all-reduce of one float per rank
// completes nowhere before every rank has sent its own.
absl::Status StartTogether(Peers& peers, const RankGroup& group, uint64_t which,
                           const Deadline& deadline) {
  const Probe barrier{"start", group.size(), group, std::nullopt, OpKind::kAllReduce, 0};
  std::vector<float> token(group.size(), 1.0f);
  return RunOne(peers, barrier, token.size() * sizeof(float), token.data(), token.data(), which,
                deadline)
      .status();
}

// Replaces every sample of the probes that time a whole-communicator collective with its mean
// over the ranks. That is what the benchmarks report (nccl-tests average each rank's loop time),
// and where an algorithm is not symmetric one rank's time misleads: a broadcast's root returns
// once it has handed its data on, so rank 0 timed the rig's 8 KiB tree broadcast at 6-10 us
// where the broadcast tool measured 20-33; with the ranks' mean (and the common start of each
// broadcast sample, Probe::start_together) calibration says 23. Every rank holds the same probes
// with the same number of samples, so their flattened samples line up.
absl::Status AverageOverRanks(Peers& peers, std::vector<Probe>& probes, uint64_t which,
                              const Deadline& deadline) {
  std::vector<double> samples;
  for (const Probe& probe : probes) {
    if (!probe.algorithm) continue;
    for (const auto& [bytes, runs] : probe.seconds) {
      samples.insert(samples.end(), runs.begin(), runs.end());
    }
  }
  if (samples.empty() || peers.size() == 1) return absl::OkStatus();
  CollectiveArgs args;
  args.kind = OpKind::kAllReduce;
  args.count = samples.size();
  args.dtype = DataType::kFloat64;
  args.op = ReduceOp::kSum;
  BeginCalibration(peers, args, AlgorithmId::kRing, which, deadline);
  if (absl::Status s = GroupRingAllReduce(peers, Everyone(peers), samples.data(), samples.size(),
                                          args.dtype, args.op);
      !s.ok()) {
    return s;
  }
  auto next = samples.begin();
  for (Probe& probe : probes) {
    if (!probe.algorithm) continue;
    for (auto& [bytes, runs] : probe.seconds) {
      for (double& run : runs) run = *next++ / peers.size();
    }
  }
  return absl::OkStatus();
}

// A buffer of `bytes` from AllocShared, freed with the object.
class SharedFloats {
 public:
  static absl::StatusOr<SharedFloats> Make(size_t bytes) {
    absl::StatusOr<void*> memory = AllocShared(bytes);
    if (!memory.ok()) return memory.status();
    return SharedFloats(static_cast<float*>(*memory));
  }
  SharedFloats(SharedFloats&& other) : data_(std::exchange(other.data_, nullptr)) {}
  SharedFloats& operator=(SharedFloats&&) = delete;
  ~SharedFloats() {
    if (data_ != nullptr) FreeShared(data_).IgnoreError();
  }
  float* data() const { return data_; }

 private:
  explicit SharedFloats(float* data) : data_(data) {}
  float* data_;
};

// `count` floats of `value`, page-aligned as the benchmarks' buffers are and as frameworks
// align their tensors. A std::vector's large buffer starts 16 bytes into a cache line, and every
// line a collective writes into it then straddles two: on an AMD EPYC VM calibration priced
// shm_direct's 1 MiB all-reduce at 383-438 us that way, against 139-178 page-aligned (and
// 95-110 in a benchmark's loop), and handed the pick to cma_direct, 1.7x slower there.
class AlignedFloats {
 public:
  AlignedFloats(size_t count, float value)
      : data_(static_cast<float*>(std::aligned_alloc(kPage, RoundUp(count * sizeof(float))))) {
    if (data_ == nullptr) throw std::bad_alloc();
    std::fill_n(data_.get(), count, value);
  }
  float* data() const { return data_.get(); }

 private:
  static constexpr size_t kPage = 4096;
  static size_t RoundUp(size_t bytes) {
    return std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
};

// Every rank runs the probes it belongs to, in the same order, round after round.
absl::Status RunProbes(Peers& peers, std::vector<Probe>& probes, const Deadline& deadline) {
  const size_t small_floats = kAnchorLargeBytes / sizeof(float);
  AlignedFloats small_in(small_floats, 1.0f), small_out(small_floats, 1.0f);
  AlignedFloats large(kLargeBytes / sizeof(float), 1.0f);
  AlignedFloats large_in(kLargeBytes / sizeof(float), 1.0f);  // a large anchor's input
  const bool any_direct =
      std::any_of(probes.begin(), probes.end(), [](const Probe& p) { return p.direct(); });
  const size_t direct_floats = any_direct ? kDirectLargeBytes / sizeof(float) : 0;
  AlignedFloats direct_in(direct_floats, 1.0f), direct_out(direct_floats, 1.0f);
  // Filled like the plain buffers above: an untouched page of AllocShared memory would be
  // allocated by whichever run touched it first, and slow that run down.
  std::optional<SharedFloats> shared_in, shared_out;
  if (std::any_of(probes.begin(), probes.end(), [](const Probe& p) { return p.shared; })) {
    absl::StatusOr<SharedFloats> in = SharedFloats::Make(kDirectLargeBytes);
    absl::StatusOr<SharedFloats> out = SharedFloats::Make(kDirectLargeBytes);
    if (!in.ok()) return in.status();
    if (!out.ok()) return out.status();
    std::fill_n(in->data(), kDirectLargeBytes / sizeof(float), 1.0f);
    std::fill_n(out->data(), kDirectLargeBytes / sizeof(float), 1.0f);
    shared_in.emplace(*std::move(in));
    shared_out.emplace(*std::move(out));
  }
  // Takes `probe`'s samples at `bytes` in `round`: all of them, or with `one_sample` the one a
  // pass of the anchors' turns takes.
  auto measure = [&](Probe& probe, size_t bytes, int round, bool one_sample,
                     uint64_t& which) -> absl::Status {
    const bool ring_large = !probe.algorithm && bytes == kLargeBytes;
    const bool anchor_large = probe.algorithm && !probe.direct() && bytes == kLargeBytes;
    if (anchor_large && round < kRounds - kRoundsLargeAnchor) return absl::OkStatus();
    const float* in = probe.shared     ? shared_in->data()
                      : probe.direct() ? direct_in.data()
                      : ring_large     ? large.data()
                      : anchor_large   ? large_in.data()
                                       : small_in.data();
    float* out = probe.shared                 ? shared_out->data()
                 : probe.direct()             ? direct_out.data()
                 : ring_large || anchor_large ? large.data()
                                              : small_out.data();
    auto run = [&](int runs) {
      return RunProbe(peers, probe, bytes, in, out, runs, &which, deadline);
    };
    const bool past_caches = probe.direct() && bytes == kDirectLargeBytes;
    if (past_caches && round < kRounds - kRoundsPastCaches) return absl::OkStatus();
    const bool warmed = probe.direct() && bytes >= kWarmedBytes && !past_caches;
    // The first run at the largest size is the first to touch most of the buffers: it maps
    // the pages of the peers' shared buffers, which a benchmark's loop pays once.
    if (warmed || anchor_large || (past_caches && round == kRounds - kRoundsPastCaches)) {
      if (absl::StatusOr<double> warm = run(1); !warm.ok()) return warm.status();
    }
    const bool together =
        !probe.start_together.ranks.empty() && (probe.algorithm.has_value() || ring_large);
    const int samples = one_sample                                            ? 1
                        : warmed || past_caches || ring_large || anchor_large ? 1
                                                                              : kSmallRuns;
    const int runs = warmed           ? DirectRuns(bytes)
                     : past_caches    ? kDirectRunsPastCaches
                     : ring_large     ? 1
                     : anchor_large   ? kLargeAnchorRuns
                     : probe.direct() ? kDirectSmallLoopRuns
                                      : kSmallLoopRuns;
    for (int i = 0; i < samples; ++i) {
      if (together) {
        if (absl::Status s = StartTogether(peers, probe.start_together, which++, deadline);
            !s.ok()) {
          return s;
        }
      }
      const Clock::time_point begun = Clock::now();
      absl::StatusOr<double> t = run(runs);
      if (!t.ok()) return t.status();
      double seconds = *t;
      // A large broadcast's root and the ranks that forward early return once the socket
      // buffers hold their data, megabytes before it has crossed: a sample of a few runs is
      // over only when the last rank has its data, as a benchmark's loop of many settles.
      if (anchor_large) {
        if (absl::Status s = StartTogether(peers, probe.start_together, which++, deadline);
            !s.ok()) {
          return s;
        }
        seconds = Since(begun) / runs;
      }
      probe.seconds[bytes].push_back(seconds);
    }
    return absl::OkStatus();
  };
  // An anchor's small sizes take their samples by turns with the other anchors', one each a
  // pass. On the rig (4 ranks on 2 cores) a collective's pace holds for a few milliseconds and
  // then shifts as the scheduler moves the ranks: one calibration timed the hierarchy's 256-byte
  // reduce-scatter at 95-104 us in one round's four samples in a row, 38-45 in another's, 55-62
  // in a third's. Taken in a row, each anchor's samples of a round were one draw of that pace,
  // and six calibrations priced the hierarchy's 8 KiB reduce-scatter at 0.95-1.45x Rabenseifner's
  // and its all-gather at 0.96-1.81x (one in three near or below, where the benchmarks' loops
  // ran Rabenseifner 1.05-1.2x faster). By turns, six more came to 1.06-1.13x and 1.10-1.16x.
  auto by_turns = [](const Probe& probe, size_t bytes) {
    return probe.algorithm && !probe.direct() && bytes != kLargeBytes;
  };
  // The algorithms of one collective and size follow each other, so that each pace they meet
  // they meet alike, and each pass runs them in the order the one before did in reverse, so that
  // none always comes first after another collective.
  std::vector<size_t> turns;  // the anchors: every one has each of kAnchorSizes
  for (size_t i = 0; i < probes.size(); ++i) {
    if (by_turns(probes[i], kSmallBytes)) turns.push_back(i);
  }
  std::stable_sort(turns.begin(), turns.end(),
                   [&](size_t a, size_t b) { return probes[a].kind < probes[b].kind; });
  for (int round = 0; round < kRounds; ++round) {
    // Envelopes must agree between ranks that run different sets of probes.
    std::vector<uint64_t> which;
    for (const Probe& probe : probes) which.push_back(FirstEnvelope(round, probe.slot));
    for (size_t i = 0; i < probes.size(); ++i) {
      for (size_t bytes : probes[i].Sizes()) {
        if (by_turns(probes[i], bytes)) continue;
        if (absl::Status s = measure(probes[i], bytes, round, false, which[i]); !s.ok()) return s;
      }
    }
    for (int pass = 0; pass < kSmallRuns; ++pass) {
      for (size_t bytes : kAnchorSizes) {
        for (size_t i : turns) {
          if (absl::Status s = measure(probes[i], bytes, round, true, which[i]); !s.ok()) return s;
        }
      }
      std::reverse(turns.begin(), turns.end());
    }
    for (size_t i = 0; i < probes.size(); ++i) {
      if (which[i] > FirstEnvelope(round, probes[i].slot + 1)) {
        return absl::InternalError(absl::StrCat("calibration probe ", probes[i].name, " ran ",
                                                which[i] - FirstEnvelope(round, probes[i].slot),
                                                " collectives a round, past kRunsPerProbeRound"));
      }
    }
  }
  return absl::OkStatus();
}

double MeasureReduceGbps() {
  std::vector<float> dst(kReduceBytes / sizeof(float), 1.0f), src(dst.size(), 2.0f);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point start = Clock::now();
    ReduceInto(DataType::kFloat32, ReduceOp::kMax, dst.data(), src.data(), dst.size());
    best = std::min(best, Since(start));
  }
  return kReduceBytes / std::max(best, 1e-9) / 1e9;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes through a temporary file and rename(), so concurrent jobs never see half a file.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string dir = path.substr(0, path.rfind('/'));
  std::string partial;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&partial, "/", part);
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("creating ", partial, ": ", std::strerror(errno)));
    }
  }
  const std::string temporary = absl::StrCat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(temporary);
    out << text;
    if (!out.flush()) {
      return absl::UnavailableError(
          absl::StrCat("writing ", temporary, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::UnavailableError(
        absl::StrCat("renaming ", temporary, " to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// A link algorithm's collective that calibration anchors.
struct Anchored {
  AlgorithmId algorithm;
  OpKind kind;
  std::string ClassName() const { return CostModel::CollectiveClass(Name(algorithm), Name(kind)); }
};

std::vector<Anchored> AnchoredCollectives() {
  std::vector<Anchored> anchored;
  for (AlgorithmId id : kLinkAlgorithms) {
    for (OpKind kind : kTimedCollectives) {
      if (Implements(id, kind)) anchored.push_back({id, kind});
    }
  }
  return anchored;
}

// What rank 0 found missing, for every rank to help measure; and rank 0's
// CommOptions::shared_buffers, which every rank must share.
struct Plan {
  bool shm = false, net = false, net_flow = false, anchors = false;
  std::vector<AlgorithmId> direct;
  bool recheck = false;      // time shm_direct against its cached curve first (RecheckDirect)
  bool net_recheck = false;  // time the net class against the cache first (RecheckNet)
  bool shared_buffers = false;

  bool empty() const {
    return !shm && !net && !net_flow && !anchors && direct.empty() && !recheck && !net_recheck;
  }
  std::string Encode() const {
    std::string text = absl::StrCat(shm ? "shm " : "", net ? "net " : "",
                                    net_flow ? "net_flow " : "", anchors ? "anchors " : "",
                                    recheck ? "recheck " : "", net_recheck ? "net_recheck " : "");
    for (AlgorithmId id : direct) absl::StrAppend(&text, Name(id), " ");
    return absl::StrCat(text, "-", shared_buffers ? " shared_buffers" : "");
  }
  static Plan Decode(absl::string_view text) {
    Plan plan;
    for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      if (word == "shm") plan.shm = true;
      if (word == "net") plan.net = true;
      if (word == CostModel::kNetFlow) plan.net_flow = true;
      if (word == "anchors") plan.anchors = true;
      if (word == "recheck") plan.recheck = true;
      if (word == "net_recheck") plan.net_recheck = true;
      if (word == "shared_buffers") plan.shared_buffers = true;
      if (std::optional<AlgorithmId> id = ParseAlgorithm(word)) plan.direct.push_back(*id);
    }
    return plan;
  }
  // The class name a direct algorithm's curves are kept under.
  const char* ClassOf(AlgorithmId id) const {
    return id == AlgorithmId::kCmaDirect && shared_buffers ? CostModel::kCmaDirectShared : Name(id);
  }
};

// Whether this process has not yet made the check `check` (a cache's path for its direct curves,
// and that with " net" for its network classes) for communicators of `count` ranks (nodes): once
// is enough, and a job that creates many communicators (a trainer's groups) pays it once.
bool FirstCheckOfCache(const std::string& check, int count) {
  static std::mutex mu;
  static std::set<std::pair<std::string, int>>* checked = new std::set<std::pair<std::string, int>>;
  std::lock_guard<std::mutex> lock(mu);
  return checked->emplace(check, count).second;
}

// How far apart two times are, as a ratio either way (>= 1).
double Apart(double a, double b) { return std::max(a / b, b / a); }

// A model's price of the recheck's all-reduce (shm_direct's, of kRecheckBytes) on `ranks`, in
// seconds.
double RecheckPrice(const CostModel& model, int ranks) {
  return model.DirectSeconds(
      CostModel::CollectiveClass(Name(AlgorithmId::kShmDirect), Name(OpKind::kAllReduce)), ranks,
      static_cast<double>(FloatsPerRank(OpKind::kAllReduce, kRecheckBytes, ranks) * sizeof(float)));
}

// On ranks but 0: the plan rank 0 published under `key` after judging a recheck.
absl::Status AdoptPlan(Store& store, const std::string& key, Plan& plan, const Deadline& deadline) {
  absl::StatusOr<std::string> text = store.Get(key, deadline);
  if (!text.ok()) return text.status();
  plan = Plan::Decode(*text);
  return absl::OkStatus();
}

// With plan.recheck: every rank times shm_direct's kRecheckBytes all-reduce; rank 0 judges the
// samples against the states on file (`prices`: JudgeRecheck's) into *verdict and tells every
// rank, through the store, the plan to go on with: the direct algorithms measured again, or
// nothing more.
absl::Status RecheckDirect(Peers& peers, Store& store, const std::vector<double>& prices,
                           Plan& plan, RecheckVerdict* verdict, uint64_t which,
                           const Deadline& deadline) {
  const Probe probe{"recheck", peers.size(), {}, AlgorithmId::kShmDirect, OpKind::kAllReduce, 0};
  AlignedFloats in(kRecheckBytes / sizeof(float), 1.0f), out(kRecheckBytes / sizeof(float), 1.0f);
  auto run = [&](int runs) {
    return RunProbe(peers, probe, kRecheckBytes, in.data(), out.data(), runs, &which, deadline);
  };
  if (absl::StatusOr<double> warm = run(DirectRuns(kRecheckBytes)); !warm.ok()) {
    return warm.status();
  }
  std::vector<double> samples;
  const Clock::time_point began = Clock::now();
  const double cpu_began = ProcessCpuSeconds();
  for (int i = 0; i < kRecheckSamples; ++i) {
    absl::StatusOr<double> t = run(DirectRuns(kRecheckBytes));
    if (!t.ok()) return t.status();
    samples.push_back(*t);
  }
  const double cpu_share = (ProcessCpuSeconds() - cpu_began) / Since(began);
  if (peers.rank() != 0) return AdoptPlan(store, "tuning/recheck", plan, deadline);
  *verdict = JudgeRecheck(prices, samples, cpu_share);
  plan.recheck = false;
  if (verdict->measure_again) {
    for (AlgorithmId id : kDirectAlgorithms) {
      if (!Usable(id, peers)) continue;
      if (std::find(plan.direct.begin(), plan.direct.end(), id) == plan.direct.end()) {
        plan.direct.push_back(id);
      }
    }
  }
  DebugLog(DebugLevel::kInfo,
           absl::StrFormat("rank 0: shm_direct's %d-byte all-reduce took %s us now, on %.0f%% of a "
                           "core; %s",
                           kRecheckBytes,
                           absl::StrJoin(samples, " ",
                                         [](std::string* out, double t) {
                                           absl::StrAppendFormat(out, "%.1f", t * 1e6);
                                         }),
                           cpu_share * 100, verdict->explanation));
  return store.Set("tuning/recheck", plan.Encode());
}

// With plan.net_recheck: every lane times its ring across nodes (NetProbe) at kLargeBytes, all
// lanes at once; rank 0 judges the samples against `price` (the cache's, on rank 0) and tells
// every rank, through the store, the plan to go on with: the network classes and the anchors
// measured again, or nothing more for them.
absl::Status RecheckNet(Peers& peers, Store& store, double price, Plan& plan, uint64_t which,
                        const Deadline& deadline) {
  const NodeLayout& nodes = peers.nodes();
  std::vector<double> samples;
  if (nodes.local_rank() < nodes.lanes()) {
    const Probe probe = NetProbe(peers);
    const RankGroup holders = LaneHolders(peers);
    AlignedFloats data(kLargeBytes / sizeof(float), 1.0f);
    // The first run warms: it spends what the link let build up before (a tbf bucket).
    for (int i = 0; i <= kNetRecheckSamples; ++i) {
      if (absl::Status s = StartTogether(peers, holders, which++, deadline); !s.ok()) return s;
      absl::StatusOr<double> t =
          RunProbe(peers, probe, kLargeBytes, data.data(), data.data(), 1, &which, deadline);
      if (!t.ok()) return t.status();
      if (i > 0) samples.push_back(*t);
    }
  }
  if (peers.rank() != 0) return AdoptPlan(store, "tuning/net_recheck", plan, deadline);
  const double now = Median(samples);
  const bool changed = Apart(now, price) > kNetChangedRatio;
  plan.net_recheck = false;
  if (changed) {
    plan.net = true;
    plan.net_flow = nodes.lanes() > 1;
    plan.anchors = peers.size() <= kMaxAnchoredRanks;
  }
  DebugLog(DebugLevel::kInfo,
           absl::StrFormat(
               "rank 0: the net class's %d-byte ring all-reduce across %d nodes (%d "
               "lanes at once) took %s ms now; the cache prices it at %.2f ms: %s",
               kLargeBytes, nodes.num_nodes(), nodes.lanes(),
               absl::StrJoin(
                   samples, " ",
                   [](std::string* out, double t) { absl::StrAppendFormat(out, "%.2f", t * 1e3); }),
               price * 1e3, changed ? "the network has changed; measuring it again" : "it stands"));
  return store.Set("tuning/net_recheck", plan.Encode());
}

// Writes `states` (texts, the one to check first first) as `cache` and its alternates; false when
// the cache itself could not be written.
bool WriteStates(const std::string& cache, const std::vector<std::string>& states) {
  bool cached = true;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::string path = i == 0 ? cache : AlternateCachePath(cache, static_cast<int>(i));
    if (absl::Status s = WriteFileAtomically(path, states[i]); !s.ok()) {
      DebugLog(DebugLevel::kWarn, absl::StrCat("rank 0: not caching the tuning: ", s.message()));
      cached = cached && i != 0;
    }
  }
  return cached;
}

}  // namespace

std::string TuningCachePath() {
  std::string dir;
  if (const char* forced = Env("WEFT_CACHE_DIR")) {
    dir = forced;
  } else if (const char* xdg = Env("XDG_CACHE_HOME")) {
    dir = absl::StrCat(xdg, "/weft");
  } else if (const char* home = Env("HOME")) {
    dir = absl::StrCat(home, "/.cache/weft");
  } else {
    return "";
  }
  std::string host = HostName();
  std::replace(host.begin(), host.end(), '/', '_');
  return absl::StrCat(dir, "/tuning-", host, ".txt");
}

std::string AlternateCachePath(const std::string& cache, int i) {
  absl::string_view stem = cache;
  absl::ConsumeSuffix(&stem, ".txt");
  return i == 1 ? absl::StrCat(stem, ".alternate.txt")
                : absl::StrCat(stem, ".alternate-", i, ".txt");
}

RecheckVerdict JudgeRecheck(const std::vector<double>& prices, const std::vector<double>& samples,
                            double cpu_share) {
  const double now = Median(samples);
  auto off = [&](double price) { return Apart(price, now); };
  auto us = [](double seconds) { return absl::StrFormat("%.1f us", seconds * 1e6); };
  RecheckVerdict verdict;
  verdict.now = now;
  verdict.explanation = absl::StrCat("the cache prices it at ", us(prices[0]));
  if (off(prices[0]) > kDisturbedRatio) {
    for (size_t i = 1; i < prices.size(); ++i) {
      absl::StrAppend(&verdict.explanation,
                      i == 1 ? ", its alternates (other states of the host)" : ",", " at ",
                      us(prices[i]));
      if (off(prices[i]) < off(prices[verdict.stand_in])) verdict.stand_in = static_cast<int>(i);
    }
    if (verdict.stand_in > 0) {
      absl::StrAppend(&verdict.explanation, ": taking the one at ", us(prices[verdict.stand_in]));
    }
  }
  const double price = prices[verdict.stand_in];
  if (off(price) <= kDisturbedRatio) {
    absl::StrAppend(&verdict.explanation, ": it stands");
    return verdict;
  }
  if (price > now) {
    verdict.measure_again = true;
    absl::StrAppend(&verdict.explanation,
                    ": measured while the host was disturbed; measuring the direct algorithms "
                    "again");
    return verdict;
  }
  const auto [fastest, slowest] = std::minmax_element(samples.begin(), samples.end());
  std::string why_not;
  if (cpu_share < kAloneCpuShare) {
    why_not = "something else shares the cores";
  } else if (*slowest > kSteadySpread * *fastest) {
    why_not = "the samples scatter";
  } else if (now > kLastingStateRatio * price) {
    why_not = "too far off for a state of the host's own";
  }
  if (why_not.empty()) {
    verdict.measure_again = true;
    verdict.new_state = true;
    absl::StrAppend(&verdict.explanation,
                    ", and the host runs it steadily slower now: another lasting state of the "
                    "host; measuring the direct algorithms again");
  } else {
    absl::StrAppend(&verdict.explanation, ": the host runs slower now, but ", why_not,
                    ": it stands");
  }
  return verdict;
}

std::string TuningCacheRevisionLine() {
  return absl::StrCat(kRevisionKey, kAlgorithmsRevision, "\n");
}

absl::StatusOr<std::vector<CostModel>> LoadOrCalibrate(Peers& peers, Store& store,
                                                       const Deadline& deadline) {
  const Clock::time_point start = Clock::now();
  const NodeLayout& nodes = peers.nodes();
  const int rank = peers.rank();
  const int node0 = static_cast<int>(nodes.members(0).size());
  const int lanes = nodes.lanes();

  CostModel model;
  Plan plan;
  plan.shared_buffers = peers.shared_buffers();
  std::string cache;
  // With plan.recheck, on rank 0: the host's states on file, the cache's first, then each
  // alternate that parses, in the order of AlternateCachePath; and their prices (RecheckPrice).
  std::vector<std::string> states;
  std::vector<double> prices;
  // On rank 0: the texts of the host's states other than the one `model` holds (their tuners'
  // disagreements are what the job's trials time: algorithm_trials.h).
  std::vector<std::string> other_states;
  double net_price = 0;  // with plan.net_recheck, on rank 0: the cache's (RecheckNet)
  if (rank == 0) {
    if (const char* files = Env("WEFT_TUNING_FILE")) {
      // A list names the host's states, the one a job starts in first.
      bool first = true;
      for (absl::string_view file : absl::StrSplit(files, ':', absl::SkipEmpty())) {
        absl::StatusOr<std::string> text = ReadFile(std::string(file));
        if (!text.ok()) {
          return absl::Status(text.status().code(),
                              absl::StrCat("reading WEFT_TUNING_FILE: ", text.status().message()));
        }
        // A copy of a tuning cache: its first line names the revision of the algorithms it was
        // measured with, which must be this one (blanked, so errors name the file's own lines).
        std::string entries = *text;
        if (absl::StartsWith(entries, kRevisionKey)) {
          const std::string revision = TuningCacheRevisionLine();
          if (!absl::StartsWith(entries, revision)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "WEFT_TUNING_FILE ", file,
                ": measured with another revision of the algorithms than ", kAlgorithmsRevision,
                " (its first line), which prices them as they were: measure ",
                "again (a job with a fresh WEFT_CACHE_DIR writes a new cache)"));
          }
          entries.erase(0, revision.size() - 1);
        }
        CostModel parsed;
        if (absl::Status s = parsed.Merge(entries, file); !s.ok()) return s;
        if (first) {
          model = std::move(parsed);
          first = false;
        } else {
          other_states.push_back(*std::move(text));
        }
      }
    } else {
      cache = TuningCachePath();
      if (absl::StatusOr<std::string> text = ReadFile(cache); !cache.empty() && text.ok()) {
        absl::string_view entries = *text;
        if (!absl::ConsumePrefix(&entries, TuningCacheRevisionLine())) {
          DebugLog(DebugLevel::kInfo,
                   absl::StrCat("rank 0: the tuning cache ", cache,
                                " was measured by another revision of the algorithms than ",
                                kAlgorithmsRevision, ": measuring again"));
        } else if (absl::Status s = model.Merge(entries, cache); !s.ok()) {
          // A damaged cache is measured again and replaced.
          DebugLog(DebugLevel::kWarn,
                   absl::StrCat("rank 0: ignoring the tuning cache: ", s.message()));
          model = CostModel();
        } else {
          states.push_back(*text);
        }
      }
      plan.shm = node0 > 1 && peers.link(nodes.members(0)[1])->transport_name() == "shm" &&
                 !model.Has("shm", node0);
      plan.net = nodes.num_nodes() > 1 && !model.Has("net", nodes.num_nodes());
      plan.net_recheck = nodes.num_nodes() > 1 && !plan.net &&
                         FirstCheckOfCache(absl::StrCat(cache, " net"), nodes.num_nodes());
      if (plan.net_recheck) {
        net_price =
            NetProbe(peers).RingLargeSeconds(model.Get("net", nodes.num_nodes()), model.gamma());
      }
      // With one lane, net is already what a lone flow gets.
      plan.net_flow =
          nodes.num_nodes() > 1 && lanes > 1 && !model.Has(CostModel::kNetFlow, nodes.num_nodes());
      for (AlgorithmId id : kDirectAlgorithms) {
        const bool measured = std::all_of(
            std::begin(kTimedCollectives), std::end(kTimedCollectives), [&](OpKind kind) {
              return model.Has(CostModel::CollectiveClass(plan.ClassOf(id), Name(kind)),
                               peers.size());
            });
        if (Usable(id, peers) && !measured) plan.direct.push_back(id);
      }
      // The alternates are read whenever the cache's shm_direct curves can serve: the recheck
      // judges against them once a process, and every job times where they disagree.
      const bool states_on_file = !states.empty() && Usable(AlgorithmId::kShmDirect, peers) &&
                                  std::find(plan.direct.begin(), plan.direct.end(),
                                            AlgorithmId::kShmDirect) == plan.direct.end();
      plan.recheck = states_on_file && FirstCheckOfCache(cache, peers.size());
      if (states_on_file) {
        prices.push_back(RecheckPrice(model, peers.size()));
        // Another revision's or a damaged alternate is no state of this host: ignored.
        for (int i = 1; i < kMaxHostStates; ++i) {
          const std::string path = AlternateCachePath(cache, i);
          absl::StatusOr<std::string> text = ReadFile(path);
          CostModel parsed;
          absl::string_view entries;
          if (text.ok()) entries = *text;
          if (absl::ConsumePrefix(&entries, TuningCacheRevisionLine()) &&
              parsed.Merge(entries, path).ok()) {
            states.push_back(*text);
            prices.push_back(RecheckPrice(parsed, peers.size()));
          }
        }
      }
      const std::vector<Anchored> anchored = AnchoredCollectives();
      plan.anchors = nodes.num_nodes() > 1 && peers.size() <= kMaxAnchoredRanks &&
                     std::any_of(anchored.begin(), anchored.end(), [&](const Anchored& a) {
                       return !model.Has(a.ClassName(), peers.size());
                     });
      if (!plan.empty() && deadline.Remaining() < kCalibrationRoom) {
        DebugLog(DebugLevel::kInfo,
                 absl::StrCat("rank 0: not calibrating ", plan.Encode(), " within ",
                              absl::FormatDuration(deadline.Remaining()),
                              " of creation deadline (WEFT_TIMEOUT); the tuner prices with ",
                              model.source()));
        const bool shared_buffers = plan.shared_buffers;
        plan = Plan();
        plan.shared_buffers = shared_buffers;
      }
      if (!plan.empty() && !model.has_reduce()) model.set_reduce_gbps(MeasureReduceGbps());
    }
    if (absl::Status s = store.Set("tuning/plan", plan.Encode()); !s.ok()) return s;
  } else {
    absl::StatusOr<std::string> text = store.Get("tuning/plan", deadline);
    if (!text.ok()) return text.status();
    plan = Plan::Decode(*text);
    if (plan.shared_buffers != peers.shared_buffers()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, ": shared_buffers (WEFT_SHARED_BUFFERS) is ",
          peers.shared_buffers() ? "on" : "off", " here but ", plan.shared_buffers ? "on" : "off",
          " on rank 0: every rank must say the same"));
    }
  }

  // Past every round: no probe's envelope numbers reach this.
  const uint64_t average = FirstEnvelope(kRounds, 0);
  // On rank 0: whether the recheck measures the host again, as a state of its own; and the
  // model as it stood before (see below).
  bool measured_again = false;
  RecheckVerdict verdict;
  std::optional<CostModel> unmeasured;
  if (plan.recheck) {
    const size_t measured_before = plan.direct.size();
    if (absl::Status s = RecheckDirect(peers, store, prices, plan, &verdict, average + 1, deadline);
        !s.ok()) {
      return s;
    }
    measured_again = rank == 0 && plan.direct.size() > measured_before;
    if (verdict.stand_in > 0) {
      // Its entries over the cache's (what it lacks, the cache still prices). It goes first, so
      // that the next job checks first the state the host is in now.
      std::rotate(states.begin(), states.begin() + verdict.stand_in,
                  states.begin() + verdict.stand_in + 1);
      std::rotate(prices.begin(), prices.begin() + verdict.stand_in,
                  prices.begin() + verdict.stand_in + 1);
      absl::string_view entries = states.front();
      absl::ConsumePrefix(&entries, TuningCacheRevisionLine());
      if (absl::Status s = model.Merge(entries, cache); !s.ok()) return s;
      if (!measured_again) WriteStates(cache, states);
    }
    if (measured_again) unmeasured = model;
  }
  if (plan.net_recheck) {
    // Its envelopes follow the shm recheck's.
    if (absl::Status s =
            RecheckNet(peers, store, net_price, plan, average + kRunsPerProbeRound, deadline);
        !s.ok()) {
      return s;
    }
  }

  // Every group measures at once, as the algorithms run; rank 0's numbers are kept (those of
  // whole-communicator collectives after AverageOverRanks).
  std::vector<Probe> probes;
  if (plan.shm && nodes.local_size() > 1) {
    probes.push_back({"shm",
                      nodes.local_size(),
                      {nodes.local_group(), nodes.local_rank()},
                      std::nullopt,
                      OpKind::kAllReduce,
                      0});
  }
  if (plan.net && nodes.local_rank() < lanes) {
    Probe probe = NetProbe(peers);
    // Left to drift apart over the small runs, the lanes' large rings overlapped only in part:
    // on the rig (two lanes, one 1 Gbit/s link per node) a lane's share measured 0.06-0.15 GB/s
    // from one calibration to the next, where it is 0.0625.
    probe.start_together = LaneHolders(peers);
    probes.push_back(std::move(probe));
  }
  // Lane 0 alone, once everything else is measured.
  std::vector<Probe> alone;
  if (plan.net_flow && nodes.local_rank() == 0) {
    alone.push_back({CostModel::kNetFlow,
                     nodes.num_nodes(),
                     {nodes.lane_group(0), nodes.node()},
                     std::nullopt,
                     OpKind::kAllReduce,
                     2});
  }
  int slot = 3;
  for (AlgorithmId id : plan.direct) {
    for (OpKind kind : kTimedCollectives) {
      Probe probe{CostModel::CollectiveClass(plan.ClassOf(id), Name(kind)),
                  peers.size(),
                  {},
                  id,
                  kind,
                  slot++};
      probe.shared = id == AlgorithmId::kCmaDirect && plan.shared_buffers;
      probes.push_back(std::move(probe));
    }
  }
  if (plan.anchors) {
    for (const Anchored& a : AnchoredCollectives()) {
      probes.push_back({a.ClassName(), peers.size(), {}, a.algorithm, a.kind, slot++});
    }
  }
  for (Probe& probe : probes) {
    if (probe.algorithm && probe.kind == OpKind::kBroadcast) probe.start_together = Everyone(peers);
  }
  if (absl::Status s = RunProbes(peers, probes, deadline); !s.ok()) return s;
  if (!alone.empty()) {
    if (absl::Status s = RunProbes(peers, alone, deadline); !s.ok()) return s;
  }
  if (absl::Status s = AverageOverRanks(peers, probes, average, deadline); !s.ok()) return s;
  probes.insert(probes.end(), alone.begin(), alone.end());
  for (const Probe& probe : probes) {
    // Rank 0 is in node 0 and in lane 0: its probes are the ones rank 0 planned.
    if (probe.algorithm) {
      model.SetCurve(probe.name, probe.ranks, probe.FitCurve());
    } else {
      model.Set(probe.name, probe.ranks, probe.FitLink(model.gamma()));
    }
  }

  bool measured = !plan.empty();
  const double measured_price = measured_again ? RecheckPrice(model, peers.size()) : 0;
  // Rank 0's judgment alone: the other ranks adopt the model it publishes.
  if (rank == 0 && measured_again && verdict.new_state &&
      Apart(measured_price, verdict.now) > kDisturbedRatio) {
    // The host left the slow state the recheck found while the direct curves were measured (that
    // VM did in one measurement of four): the curves are of no one state, and no file takes them.
    // (A state measured because the host ran faster is kept whatever the host does: it is no slower
    // than what stood in.)
    DebugLog(DebugLevel::kInfo,
             absl::StrFormat("rank 0: the host left the state it was found in while it was "
                             "measured (shm_direct's %d-byte all-reduce took %.1f us, and "
                             "%.1f us as measured in %.0f ms): no state on file takes these curves",
                             kRecheckBytes, verdict.now * 1e6, measured_price * 1e6,
                             Since(start) * 1e3));
    model = *std::move(unmeasured);
    measured_again = false;
    measured = false;
    // The state that stood in is still the nearest on file: it goes first, as unmeasured.
    if (verdict.stand_in > 0) WriteStates(cache, states);
  }
  if (rank == 0) {
    if (!measured && states.size() > 1) {
      other_states.insert(other_states.end(), states.begin() + 1, states.end());
    }
    if (measured) {
      model.set_source(cache.empty() ? "measured" : absl::StrCat("measured, cached in ", cache));
      if (DebugEnabled(DebugLevel::kInfo)) {
        DebugLog(DebugLevel::kInfo, absl::StrCat("rank 0: tuner calibrated ", plan.Encode(), " in ",
                                                 Since(start) * 1e3, " ms"));
      }
      if (!cache.empty()) {
        // A state measured again joins those on file, first; with kMaxHostStates on file, it
        // takes the place of the one priced nearest it (a state measured twice, in effect: that
        // VM's middle state came out at 112 and 137 us), so the farthest states stay.
        if (!measured_again) states.clear();
        if (states.size() >= static_cast<size_t>(kMaxHostStates)) {
          size_t nearest = 0;
          for (size_t i = 1; i < states.size(); ++i) {
            if (Apart(prices[i], measured_price) < Apart(prices[nearest], measured_price)) {
              nearest = i;
            }
          }
          states.erase(states.begin() + static_cast<std::ptrdiff_t>(nearest));
        }
        states.insert(states.begin(), TuningCacheRevisionLine() + model.Format());
        if (!WriteStates(cache, states)) model.set_source("measured");
        // A state measured again joins the others; a communicator measured for anything else
        // (a new group size) has no other state measured alike.
        if (measured_again) other_states.assign(states.begin() + 1, states.end());
      }
    }
    std::string published = absl::StrCat(model.source(), "\n", model.Format());
    for (const std::string& text : other_states) {
      absl::StrAppend(&published, kStateSeparator, text);
    }
    if (absl::Status s = store.Set("tuning/model", published); !s.ok()) return s;
  }
  // Rank 0 too adopts what it published: every rank then holds the very same numbers.
  absl::StatusOr<std::string> published = store.Get("tuning/model", deadline);
  if (!published.ok()) return published.status();
  const size_t newline = published->find('\n');
  std::vector<CostModel> adopted;
  for (absl::string_view text :
       absl::StrSplit(absl::string_view(*published).substr(newline + 1), kStateSeparator)) {
    absl::ConsumePrefix(&text, TuningCacheRevisionLine());
    CostModel& state = adopted.emplace_back();
    if (absl::Status s = state.Merge(text, "rank 0's tuning"); !s.ok()) return s;
    state.set_source(published->substr(0, newline));
  }
  return adopted;
}

}  // namespace weft
