// The tuner's parts in one process: the cost model's text format, the node layout and lane plan,
// the choices CostTuner makes for a given model, the selector's WEFT_ALGO override, and
// calibration's use of WEFT_TUNING_FILE and of the per-host cache.
#include "algorithms/tuner.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_trials.h"
#include "algorithms/arena_rounds.h"
#include "algorithms/hierarchical_group.h"
#include "algorithms/selector.h"
#include "algorithms/tuner_calibration.h"
#include "algorithms/tuner_model.h"
#include "bootstrap/file_store.h"
#include "gtest/gtest.h"
#include "node_layout.h"
#include "peers.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft {
namespace {

using testing::Scaled;

constexpr char kModel[] = R"(# a test machine
shm.alpha_us 2
shm.gbps 4
net.alpha_us 50   # a slow network
net.gbps 1
reduce.gbps 8
# all_reduce: shm_direct 1 us + n / 4 GB/s, cma_direct 10 us + n / 10 GB/s
shm_direct.all_reduce.2.us_at_0 1
shm_direct.all_reduce.2.us_at_4000000 1001
cma_direct.all_reduce.2.us_at_0 10
cma_direct.all_reduce.2.us_at_10000000 1010
# all_gather: shm_direct the same; cma_direct 3 us, then 20 GB/s up to 500 kB and 3 GB/s beyond
shm_direct.all_gather.2.us_at_0 1
shm_direct.all_gather.2.us_at_4000000 1001
cma_direct.all_gather.2.us_at_0 3
cma_direct.all_gather.2.us_at_500000 28
cma_direct.all_gather.2.us_at_1100000 228
cma_direct.all_gather.2.us_at_33554432 11046.144
)";

CostModel TestModel() {
  CostModel model;
  EXPECT_TRUE(model.Merge(kModel, "test.txt").ok());
  return model;
}

// A communicator's view for the selector: links are never touched while choosing.
std::unique_ptr<Peers> FakePeers(const std::vector<std::string>& hosts, int rank) {
  auto peers = std::make_unique<Peers>(rank, static_cast<int>(hosts.size()),
                                       std::vector<std::unique_ptr<Link>>(hosts.size()), nullptr);
  peers->SetNodes(NodeLayout(hosts, rank));
  return peers;
}

// One rank alone on its host, with the host's arena: where the trials run.
std::unique_ptr<Peers> OneHostPeers() {
  static int made = 0;
  const testing::TempDir store_dir("tuner-test");
  FileStore store(store_dir.path());
  absl::StatusOr<std::unique_ptr<ShmArena>> arena =
      ShmArena::Create(store, absl::StrCat("tuner-test-", getpid(), "-", made++), 0, {0},
                       ArenaRounds::AreaBytes(), Deadline::In(Scaled(absl::Seconds(10))));
  if (!arena.ok()) {
    ADD_FAILURE() << arena.status();
    return nullptr;
  }
  auto peers =
      std::make_unique<Peers>(0, 1, std::vector<std::unique_ptr<Link>>(1), *std::move(arena));
  peers->SetNodes(NodeLayout({"a"}, 0));
  return peers;
}

TEST(CostModel, ParsesEntriesWithAndWithoutGroupSizes) {
  const CostModel model = TestModel();
  EXPECT_EQ(model.source(), "test.txt");
  EXPECT_DOUBLE_EQ(model.Get("shm", 7).alpha_us, 2);
  EXPECT_DOUBLE_EQ(model.Get("net", 2).gbps, 1);
  EXPECT_DOUBLE_EQ(model.reduce_gbps(), 8);
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_reduce", 2, 1e6), 110e-6, 1e-12);
  // Below the first point the fixed cost; between points a straight line; beyond the last, the
  // line from the first point through the last (the last point's own rate), not the last
  // segment's slope.
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_gather", 2, 0), 3e-6, 1e-12);
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_gather", 2, 250000), 15.5e-6, 1e-12);
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_gather", 2, 1400000), 328e-6, 1e-12);
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_gather", 2, 64 << 20), (3 + 2 * 11043.144) * 1e-6,
              1e-12);
  EXPECT_NEAR(model.DirectSeconds("cma_direct.all_reduce", 2, 20e6), (10 + 2 * 1000) * 1e-6, 1e-12);
  // A direct algorithm measured on 2 ranks, asked for 4: the memory bus is shared, so what the
  // bytes add takes twice as long; the fixed cost stays.
  EXPECT_NEAR(model.DirectSeconds("shm_direct.all_reduce", 4, 4e6), 2001e-6, 1e-12);
  EXPECT_NEAR(model.DirectSeconds("shm_direct.all_reduce", 4, 0), 1e-6, 1e-12);
  EXPECT_TRUE(model.Has("shm", 0));
  EXPECT_FALSE(model.Has("shm", 2));
}

TEST(CostModel, SizedEntriesWinAndTheNearestSizeStandsIn) {
  CostModel model;
  ASSERT_TRUE(model
                  .Merge("shm.alpha_us 5\nshm.gbps 1\nshm.4.alpha_us 3\nshm.4.gbps 2\n"
                         "net.8.alpha_us 40\nnet.8.gbps 3\n",
                         "f")
                  .ok());
  EXPECT_DOUBLE_EQ(model.Get("shm", 4).alpha_us, 3);
  EXPECT_DOUBLE_EQ(model.Get("shm", 2).alpha_us, 5);   // size-less entry
  EXPECT_DOUBLE_EQ(model.Get("net", 2).alpha_us, 40);  // nearest size, links are not scaled
  EXPECT_DOUBLE_EQ(model.Get("net", 2).gbps, 3);
  // Never measured: three passes at shm speed.
  EXPECT_NEAR(model.DirectSeconds("cma_direct.broadcast", 4, 1e6), 2 * 3e-6 + 3e6 / 2e9, 1e-12);
}

TEST(CostModel, AnchorsNeedOnePointAndCountForTheirOwnGroupSize) {
  CostModel model;
  ASSERT_TRUE(model
                  .Merge("hierarchical.all_reduce.4.us_at_256 80\n"
                         "tree.broadcast.us_at_8192 30\ntree.broadcast.us_at_8 20\n",
                         "anchors.txt")
                  .ok());
  const TimeCurve* hierarchical = model.Anchors("hierarchical.all_reduce", 4);
  ASSERT_NE(hierarchical, nullptr);
  EXPECT_EQ(hierarchical->points().size(), 1u);
  EXPECT_DOUBLE_EQ(hierarchical->points().at(256), 80);
  EXPECT_TRUE(model.Has("hierarchical.all_reduce", 4));
  // Measured on 4 ranks, they say nothing of 8; size-less ones apply to any size.
  EXPECT_EQ(model.Anchors("hierarchical.all_reduce", 8), nullptr);
  ASSERT_NE(model.Anchors("tree.broadcast", 8), nullptr);
  EXPECT_EQ(model.Anchors("tree.broadcast", 8)->points().size(), 2u);
  EXPECT_EQ(model.Anchors("ring.all_reduce", 4), nullptr);
}

TEST(CostModel, FormatReadsBackTheSameModel) {
  const CostModel model = TestModel();
  CostModel again;
  ASSERT_TRUE(again.Merge(model.Format(), "formatted").ok());
  EXPECT_EQ(again.Format(), model.Format());
  EXPECT_NEAR(again.DirectSeconds("cma_direct.all_gather", 2, 800000), 128e-6, 1e-12);
}

TEST(CostModel, ErrorsNameTheFileLineAndTheValidKeys) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"shm.gbps 4\n\nnet.speed 3\n", "f.txt:3"}, Case{"shm.gbps -1\n", "positive"},
        Case{"shm.gbps\n", "two words"}, Case{"gpu.alpha_us 1\n", "unknown key"},
        Case{"shm.x.gbps 1\n", "RANKS"}, Case{"net.alpha_us 3\n", "both"},
        Case{"shm_direct.2.gbps 1\n", "ALGORITHM.COLLECTIVE"},
        Case{"cma_direct.all_to_all.us_at_8 1\n", "unknown key"},
        Case{"shm_direct.all_reduce.2.gbps 1\n", "unknown field"},
        Case{"shm_direct.all_reduce.us_at_x 1\n", "unknown field"},
        Case{"shm.us_at_8 1\n", "unknown field"},
        Case{"cma_direct.broadcast.us_at_8 1\n", "two us_at_BYTES points"},
        Case{"tree.all_reduce.4.us_at_8 1\n", "unknown key"},
        Case{"rabenseifner.broadcast.us_at_8 1\n", "ring or rabenseifner"},
        Case{"ring.all_reduce.4.gbps 1\n", "unknown field"}}) {
    CostModel model;
    absl::Status status = model.Merge(c.text, "f.txt");
    EXPECT_FALSE(status.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(status.message(), c.says)) << status.message();
  }
}

TEST(NodeLayout, GroupsRanksByHostInRankOrder) {
  const NodeLayout layout({"x", "y", "x", "x"}, 3);
  EXPECT_EQ(layout.num_nodes(), 2);
  EXPECT_EQ(layout.node(), 0);
  EXPECT_EQ(layout.local_rank(), 2);
  EXPECT_EQ(layout.members(0), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(layout.members(1), (std::vector<int>{1}));
  EXPECT_EQ(layout.lanes(), 1);
  EXPECT_TRUE(layout.uneven());
  EXPECT_EQ(layout.lane_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(layout.Describe(), "2 nodes (3+1 ranks)");
  EXPECT_EQ(NodeLayout({"a", "b", "a", "b"}, 0).Describe(), "2 nodes x 2 ranks");
}

TEST(LaneBlocks, PacksEachLaneNodeByNode) {
  // Nodes: {0, 2, 4} and {1, 3}: two lanes; rank 4 (local rank 2) rides on lane 0.
  const LaneBlocks plan(NodeLayout({"a", "b", "a", "b", "a"}, 0));
  EXPECT_EQ(plan.ranks[0], (std::vector<int>{0, 4, 1}));
  EXPECT_EQ(plan.ranks[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.node_start[0], (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(plan.node_start[1], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(plan.first_block, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(plan.lane_of(4), 0);
  EXPECT_EQ(plan.index_of_rank[1], 2);
}

// Where both direct algorithms can run.
TuningShape TwoRanksOnOneHost() {
  TuningShape shape;
  shape.ranks = 2;
  shape.arena = shape.remote_read = true;
  return shape;
}

TuningShape TwoNodesOfTwoRanks() {
  TuningShape shape;
  shape.ranks = 4;
  shape.nodes = 2;
  shape.lanes = shape.max_local = 2;
  return shape;
}

TEST(CostTuner, OneHostTakesTheDirectAlgorithmThatIsCheaperAtEachSize) {
  const CostTuner tuner(TestModel());
  TuningShape shape = TwoRanksOnOneHost();
  // shm_direct: 1 us + n / 4 GB/s; cma_direct: 10 us + n / 10 GB/s; they cross at 60 kB.
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 8, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 32 << 10, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 128 << 10, shape).algorithm, AlgorithmId::kCmaDirect);
  const TunerChoice large = tuner.Choose(OpKind::kAllReduce, 64 << 20, shape);
  EXPECT_EQ(large.algorithm, AlgorithmId::kCmaDirect);
  EXPECT_NEAR(large.predicted_s, 10e-6 + (64 << 20) / 10e9, 1e-12);
  // Without cross-memory attach only shm_direct is left of the two.
  shape.remote_read = false;
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 64 << 20, shape).algorithm, AlgorithmId::kShmDirect);
  // Without the arena the link algorithms remain; on 2 ranks Rabenseifner is the ring's twin,
  // and ties keep the preference order. On 3 ranks its fold costs a whole extra transfer.
  shape.arena = false;
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 64 << 20, shape).algorithm,
            AlgorithmId::kRabenseifner);
  shape.ranks = 3;
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 64 << 20, shape).algorithm, AlgorithmId::kRing);
  EXPECT_EQ(tuner.Choose(OpKind::kBroadcast, 8, shape).algorithm, AlgorithmId::kTree);
}

TEST(CostTuner, EachDirectCollectiveFollowsItsOwnCurve) {
  const CostTuner tuner(TestModel());
  const TuningShape shape = TwoRanksOnOneHost();
  // all_gather: cma_direct is faster than shm_direct in the caches only.
  EXPECT_EQ(tuner.Choose(OpKind::kAllGather, 8, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllGather, 256 << 10, shape).algorithm, AlgorithmId::kCmaDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllGather, 64 << 20, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kCmaDirect, OpKind::kAllGather, 800000, shape), 128e-6,
              1e-12);
  // Without entries of its own a collective is priced from the defaults, not from another's.
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kBroadcast, 1e6, shape),
              2 * 2e-6 + 1e6 / (4e9 / 3), 1e-12);
  // A reduce makes an all-reduce's copies; a barrier pays the fixed part only.
  EXPECT_DOUBLE_EQ(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kReduce, 1e6, shape),
                   tuner.Predict(AlgorithmId::kShmDirect, OpKind::kAllReduce, 1e6, shape));
  EXPECT_DOUBLE_EQ(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kBarrier, 1e6, shape), 1e-6);
}

TEST(CostTuner, SharedBuffersPriceCmaDirectFromItsOwnCurve) {
  CostModel model = TestModel();
  ASSERT_TRUE(model
                  .Merge("cma_direct_shared.all_reduce.2.us_at_0 2\n"
                         "cma_direct_shared.all_reduce.2.us_at_20000000 1002\n",
                         "shared.txt")
                  .ok());
  const CostTuner tuner(model);
  TuningShape shape = TwoRanksOnOneHost();
  // cma_direct over plain buffers: 10 us + n / 10 GB/s; over AllocShared ones 2 us + n / 20 GB/s.
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kCmaDirect, OpKind::kAllReduce, 1e6, shape), 110e-6,
              1e-12);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 32 << 10, shape).algorithm, AlgorithmId::kShmDirect);
  shape.shared_buffers = true;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kCmaDirect, OpKind::kAllReduce, 1e6, shape), 52e-6, 1e-12);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 8, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 32 << 10, shape).algorithm, AlgorithmId::kCmaDirect);
}

TEST(CostTuner, PricesTheRingWithTheFormulaOfTheSpec) {
  const CostTuner tuner(TestModel());
  TuningShape shape = TwoNodesOfTwoRanks();
  // 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma over the network.
  const double n = 1e6;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRing, OpKind::kAllReduce, n, shape),
              6 * 50e-6 + 1.5 * n / 1e9 + 0.75 * n / 8e9, 1e-12);
  EXPECT_LT(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kAllReduce, n, shape), 0);
  EXPECT_LT(tuner.Predict(AlgorithmId::kPairwise, OpKind::kAllReduce, n, shape), 0);
}

TEST(CostTuner, ARingOrATreeAcrossNodesGetsWhatALoneFlowGets) {
  // Two lanes sharing one NIC: a lone flow gets twice what each gets with the other lane busy.
  CostModel model = TestModel();
  ASSERT_TRUE(model.Merge("net_flow.alpha_us 40\nnet_flow.gbps 2\n", "flow.txt").ok());
  TuningShape shape = TwoNodesOfTwoRanks();
  const double n = 1e6;
  // The bandwidth of the lone flow, the latency of net (measured with every rank running).
  EXPECT_NEAR(CostTuner(model).Predict(AlgorithmId::kRing, OpKind::kAllReduce, n, shape),
              6 * 50e-6 + 1.5 * n / 2e9 + 0.75 * n / 8e9, 1e-12);
  // Rabenseifner's first step sends from both lanes at once: net's price.
  EXPECT_NEAR(
      CostTuner(model).Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
      CostTuner(TestModel()).Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
      1e-12);
  // A 64 KiB broadcast: priced at net's speed, the tree's one crossing loses to the hierarchy's
  // two half-size ones; at a lone flow's, it wins, as it does on such a network.
  EXPECT_EQ(CostTuner(TestModel()).Choose(OpKind::kBroadcast, 64 << 10, shape).algorithm,
            AlgorithmId::kHierarchical);
  EXPECT_EQ(CostTuner(model).Choose(OpKind::kBroadcast, 64 << 10, shape).algorithm,
            AlgorithmId::kTree);
  // Without an entry of its own, a lone flow is priced as net.
  EXPECT_DOUBLE_EQ(TestModel().Get(CostModel::kNetFlow, 2).gbps, 1);
  EXPECT_DOUBLE_EQ(model.Get(CostModel::kNetFlow, 2).gbps, 2);
}

TEST(CostTuner, TwoNodesOverASlowNetworkGoHierarchical) {
  const CostTuner tuner(TestModel());
  TuningShape shape = TwoNodesOfTwoRanks();
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather}) {
    const TunerChoice choice = tuner.Choose(kind, 64 << 20, shape);
    EXPECT_EQ(choice.algorithm, AlgorithmId::kHierarchical) << Name(kind);
    EXPECT_GT(choice.predicted_s, 0);
  }
  // The hierarchy halves what crosses the network: well under the ring's 3/4 of n each way.
  EXPECT_LT(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kAllReduce, 64 << 20, shape),
            0.5 * tuner.Predict(AlgorithmId::kRing, OpKind::kAllReduce, 64 << 20, shape));
  const std::string explained = tuner.Explain(OpKind::kAllReduce, 64 << 20, shape);
  EXPECT_TRUE(absl::StrContains(explained, "hierarchical predicted")) << explained;
  EXPECT_TRUE(absl::StrContains(explained, "ring ")) << explained;
  EXPECT_TRUE(absl::StrContains(explained, "model: test.txt")) << explained;
}

TEST(CostTuner, RabenseifnersAllReduceCrossesTheNetworkWithALocalShareOfTheBuffer) {
  TuningShape shape = TwoNodesOfTwoRanks();
  const CostTuner tuner(TestModel());
  const double n = 64 << 20;
  // Halving pairs the ranks of a node first (shm: 2 us, 4 GB/s) over half the buffer; a quarter
  // of it crosses the network (50 us, 1 GB/s); the doubling retraces both; the reduction reads
  // 3/4 of it (8 GB/s).
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
              2 * (2e-6 + 0.5 * n / 4e9 + 50e-6 + 0.25 * n / 1e9) + 0.75 * n / 8e9, 1e-12);
  // Uneven nodes (3 + 1 ranks) price every step on the network.
  shape.lanes = 1;
  shape.max_local = 3;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
              4 * 50e-6 + 1.5 * n / 1e9 + 0.75 * n / 8e9, 1e-12);
}

// Across nodes past 8 KiB a hierarchical broadcast or all-reduce wins a near tie (its senders are
// done sooner than calibration, timing to the last rank, shows); an all-gather or reduce-scatter
// goes to the cheapest, as the rig ran them. Up to 8 KiB the hierarchy must be 5% cheaper than
// the cheapest other algorithm: the rig's benchmark loops ran the best flat one faster at every
// size there.
TEST(CostTuner, AcrossNodesTheHierarchyWinsALargeNearTieAndMustUndercutASmallOne) {
  const TuningShape shape = TwoNodesOfTwoRanks();
  auto pick = [&](OpKind kind, AlgorithmId flat, size_t bytes, double hierarchy_us) {
    CostModel model = TestModel();
    const std::string at = absl::StrCat(".", Name(kind), ".4.us_at_", bytes, " ");
    EXPECT_TRUE(
        model
            .Merge(absl::StrCat(Name(flat), at, "100\n", "hierarchical", at, hierarchy_us, "\n"),
                   "near.txt")
            .ok());
    const TunerChoice choice = CostTuner(model).Choose(kind, bytes, shape);
    EXPECT_NEAR(choice.predicted_s,
                (choice.algorithm == AlgorithmId::kHierarchical ? hierarchy_us : 100) * 1e-6,
                1e-12);
    return choice.algorithm;
  };
  for (const auto& [kind, flat, bytes] :
       {std::tuple(OpKind::kBroadcast, AlgorithmId::kTree, size_t{2} << 20),
        std::tuple(OpKind::kAllReduce, AlgorithmId::kRabenseifner, size_t{8} << 20)}) {
    EXPECT_EQ(pick(kind, flat, bytes, 99), AlgorithmId::kHierarchical) << Name(kind);
    EXPECT_EQ(pick(kind, flat, bytes, 104), AlgorithmId::kHierarchical) << Name(kind);
    EXPECT_EQ(pick(kind, flat, bytes, 106), flat) << Name(kind);
  }
  for (OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    EXPECT_EQ(pick(kind, AlgorithmId::kRabenseifner, 32768, 99), AlgorithmId::kHierarchical)
        << Name(kind);
    EXPECT_EQ(pick(kind, AlgorithmId::kRabenseifner, 32768, 101), AlgorithmId::kRabenseifner)
        << Name(kind);
  }
  // Up to 8 KiB every collective's hierarchy must undercut the cheapest other algorithm.
  for (const auto& [kind, flat] : {std::pair(OpKind::kBroadcast, AlgorithmId::kTree),
                                   std::pair(OpKind::kAllReduce, AlgorithmId::kRabenseifner),
                                   std::pair(OpKind::kAllGather, AlgorithmId::kRabenseifner),
                                   std::pair(OpKind::kReduceScatter, AlgorithmId::kRabenseifner)}) {
    for (size_t bytes : {size_t{256}, size_t{8192}}) {
      EXPECT_EQ(pick(kind, flat, bytes, 94), AlgorithmId::kHierarchical) << Name(kind) << bytes;
      EXPECT_EQ(pick(kind, flat, bytes, 96), flat) << Name(kind) << bytes;
      EXPECT_EQ(pick(kind, flat, bytes, 101), flat) << Name(kind) << bytes;
    }
  }
}

TEST(CostTuner, AcrossNodesAFormulaMovesOntoItsAnchors) {
  TuningShape shape = TwoNodesOfTwoRanks();
  const CostTuner formulas(TestModel());
  auto formula = [&](AlgorithmId id, double bytes) {
    return formulas.Predict(id, OpKind::kAllReduce, static_cast<size_t>(bytes), shape);
  };
  // The formulas count latencies: recursive doubling's two, against the hierarchy's two network
  // and two shared-memory ones and Rabenseifner's four network ones.
  ASSERT_LT(formula(AlgorithmId::kRecursiveDoubling, 256),
            formula(AlgorithmId::kHierarchical, 256));
  ASSERT_LT(formula(AlgorithmId::kRecursiveDoubling, 256),
            formula(AlgorithmId::kRabenseifner, 256));
  // Measured whole, Rabenseifner's small all-reduce is the fastest (as it was on the
  // network-namespace rig, where the hierarchy's hand-offs inside the node wait for a shared
  // core).
  CostModel measured = TestModel();
  ASSERT_TRUE(measured
                  .Merge("recursive_doubling.all_reduce.4.us_at_256 150\n"
                         "hierarchical.all_reduce.4.us_at_256 120\n"
                         "hierarchical.all_reduce.4.us_at_8192 200\n"
                         "rabenseifner.all_reduce.4.us_at_256 60\n",
                         "measured.txt")
                  .ok());
  const CostTuner anchored(measured);
  auto predict = [&](AlgorithmId id, double bytes) {
    return anchored.Predict(id, OpKind::kAllReduce, static_cast<size_t>(bytes), shape);
  };
  const AlgorithmId hierarchical = AlgorithmId::kHierarchical;
  EXPECT_NEAR(predict(hierarchical, 256), 120e-6, 1e-12);
  EXPECT_NEAR(predict(hierarchical, 8192), 200e-6, 1e-12);
  EXPECT_EQ(anchored.Choose(OpKind::kAllReduce, 256, shape).algorithm, AlgorithmId::kRabenseifner);
  // Below the first anchor, its miss; between two, a straight line between their misses.
  const double miss_256 = 120e-6 - formula(hierarchical, 256);
  const double miss_8k = 200e-6 - formula(hierarchical, 8192);
  EXPECT_NEAR(predict(hierarchical, 8), formula(hierarchical, 8) + miss_256, 1e-12);
  const double half = (256 + 8192) / 2.0;
  EXPECT_NEAR(predict(hierarchical, half), formula(hierarchical, half) + (miss_256 + miss_8k) / 2,
              1e-12);
  // Beyond the last, its miss: what the bytes add is the formula's, and large all-reduces still
  // go hierarchical.
  const size_t large = 64 << 20;
  EXPECT_NEAR(predict(hierarchical, large), formula(hierarchical, large) + miss_8k, 1e-12);
  EXPECT_EQ(anchored.Choose(OpKind::kAllReduce, large, shape).algorithm,
            AlgorithmId::kHierarchical);
  // Collectives without anchors, and one host, keep their formulas.
  EXPECT_DOUBLE_EQ(predict(AlgorithmId::kRing, 256), formula(AlgorithmId::kRing, 256));
  TuningShape one_host = shape;
  one_host.nodes = 1;
  EXPECT_DOUBLE_EQ(anchored.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, 256, one_host),
                   formulas.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, 256, one_host));
}

TEST(Selector, WeftAlgoOverridesTheTuner) {
  auto peers = FakePeers({"a", "a", "b", "b"}, 0);
  absl::StatusOr<AlgorithmSelector> selector =
      AlgorithmSelector::Create("all_reduce=ring,broadcast=tree");
  ASSERT_TRUE(selector.ok()) << selector.status();
  selector->SetTuner(std::make_shared<CostTuner>(TestModel()));
  EXPECT_TRUE(selector->CheckForced(*peers, "auto").ok());
  EXPECT_EQ(selector->Choose(OpKind::kAllReduce, 64 << 20, *peers).algorithm, AlgorithmId::kRing);
  EXPECT_EQ(selector->Choose(OpKind::kBroadcast, 64 << 20, *peers).algorithm, AlgorithmId::kTree);
  EXPECT_EQ(selector->Choose(OpKind::kAllGather, 64 << 20, *peers).algorithm,
            AlgorithmId::kHierarchical);
  EXPECT_GT(selector->Predict(AlgorithmId::kRing, OpKind::kAllReduce, 64 << 20, *peers), 0);
  EXPECT_TRUE(absl::StrContains(selector->Explain(OpKind::kAllReduce, 1024, *peers),
                                "WEFT_ALGO forces ring"));
}

// A forced algorithm that cannot run on the communicator is an error naming it, the collective
// and the reason, not a quiet fallback to the tuner; a one-rank communicator runs anything.
TEST(Selector, WeftAlgoThatCannotRunHereIsAnError) {
  const auto check = [](const std::string& spec, const Peers& peers, const char* transport) {
    absl::StatusOr<AlgorithmSelector> selector = AlgorithmSelector::Create(spec);
    EXPECT_TRUE(selector.ok()) << selector.status();
    return selector.ok() ? selector->CheckForced(peers, transport) : selector.status();
  };
  const auto two_hosts = FakePeers({"a", "a", "b", "b"}, 0);
  const absl::Status across = check("all_reduce=ring,broadcast=shm_direct", *two_hosts, "auto");
  EXPECT_EQ(across.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(across.message(),
            "WEFT_ALGO forces shm_direct for broadcast, but it cannot run on this communicator: "
            "the ranks do not share memory (they span 2 hosts)");
  // One host without the arena: WEFT_TRANSPORT=tcp.
  const auto one_host_tcp = FakePeers({"a", "a"}, 1);
  const absl::Status tcp = check("shm_direct", *one_host_tcp, "tcp");
  EXPECT_EQ(tcp.message(),
            "WEFT_ALGO forces shm_direct for all_reduce, but it cannot run on this communicator: "
            "the ranks do not share memory (transport tcp)");
  EXPECT_TRUE(absl::StrContains(check("cma", *two_hosts, "auto").message(),
                                "forces cma_direct for all_reduce"));
  // Algorithms over links run anywhere; one rank alone runs whatever is forced.
  EXPECT_TRUE(check("ring", *two_hosts, "tcp").ok());
  EXPECT_TRUE(check("hierarchical", *one_host_tcp, "tcp").ok());
  EXPECT_TRUE(check("shm_direct", *FakePeers({"a"}, 0), "tcp").ok());
}

TEST(Selector, AutoForcesNothing) {
  auto peers = FakePeers({"a", "a", "b", "b"}, 0);
  auto tuner = std::make_shared<CostTuner>(TestModel());
  absl::StatusOr<AlgorithmSelector> plain = AlgorithmSelector::Create("");
  absl::StatusOr<AlgorithmSelector> auto_only = AlgorithmSelector::Create("auto");
  absl::StatusOr<AlgorithmSelector> mixed = AlgorithmSelector::Create("auto,broadcast=tree");
  ASSERT_TRUE(plain.ok() && auto_only.ok() && mixed.ok());
  for (AlgorithmSelector* selector : {&*plain, &*auto_only, &*mixed}) selector->SetTuner(tuner);
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kBroadcast}) {
    for (size_t bytes : {size_t{8}, size_t{64} << 20}) {
      EXPECT_EQ(auto_only->Choose(kind, bytes, *peers).algorithm,
                plain->Choose(kind, bytes, *peers).algorithm)
          << Name(kind) << " " << bytes;
    }
  }
  EXPECT_EQ(mixed->Choose(OpKind::kBroadcast, 8, *peers).algorithm, AlgorithmId::kTree);
  EXPECT_EQ(mixed->Choose(OpKind::kAllReduce, 64 << 20, *peers).algorithm,
            plain->Choose(OpKind::kAllReduce, 64 << 20, *peers).algorithm);
  EXPECT_FALSE(AlgorithmSelector::Create("autotune").ok());
}

// Takes `above` for collectives of `threshold` bytes or more, the ring below.
class ThresholdTuner final : public Tuner {
 public:
  ThresholdTuner(size_t threshold, AlgorithmId above) : threshold_(threshold), above_(above) {}
  TunerChoice Choose(OpKind, size_t bytes, const TuningShape&) const override {
    return {bytes >= threshold_ ? above_ : AlgorithmId::kRing, 1e-3};
  }
  double Predict(AlgorithmId, OpKind, size_t, const TuningShape&) const override { return 1e-3; }
  std::string Explain(OpKind, size_t bytes, const TuningShape&) const override {
    return absl::StrCat(bytes >= threshold_ ? Name(above_) : "ring", " predicted 1 ms");
  }

 private:
  size_t threshold_;
  AlgorithmId above_;
};

// A host with two states: where their tuners disagree, both choices are contenders, the first
// state's first; where they agree, or WEFT_ALGO forces one, there are none. Asked again, the same
// (the decisions are cached).
TEST(Selector, TheStatesChoicesContendWhereTheyDisagree) {
  auto peers = FakePeers({"a", "a", "b", "b"}, 0);
  absl::StatusOr<AlgorithmSelector> selector = AlgorithmSelector::Create("broadcast=tree");
  ASSERT_TRUE(selector.ok()) << selector.status();
  selector->SetTuners(
      {std::make_shared<ThresholdTuner>(size_t{1} << 20, AlgorithmId::kRabenseifner),
       std::make_shared<ThresholdTuner>(size_t{64} << 10, AlgorithmId::kRabenseifner)});
  // The choice, and its contenders' count.
  const auto chosen = [&](OpKind kind, size_t bytes) {
    const AlgorithmSelector::Choice choice = selector->Choose(kind, bytes, *peers);
    return std::make_pair(choice.algorithm, choice.contender_count);
  };
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(chosen(OpKind::kAllReduce, 8), std::make_pair(AlgorithmId::kRing, 0));
    EXPECT_EQ(chosen(OpKind::kAllReduce, 64 << 20), std::make_pair(AlgorithmId::kRabenseifner, 0));
    EXPECT_EQ(chosen(OpKind::kBroadcast, 256 << 10), std::make_pair(AlgorithmId::kTree, 0));
    const AlgorithmSelector::Choice middle =
        selector->Choose(OpKind::kAllReduce, 256 << 10, *peers);
    EXPECT_EQ(middle.algorithm, AlgorithmId::kRing);
    ASSERT_EQ(middle.contender_count, 2);
    EXPECT_EQ(middle.contenders[0], AlgorithmId::kRing);
    EXPECT_EQ(middle.contenders[1], AlgorithmId::kRabenseifner);
    EXPECT_DOUBLE_EQ(middle.fastest_s, 1e-3);
  }
  EXPECT_TRUE(absl::EndsWith(selector->Explain(OpKind::kAllReduce, 256 << 10, *peers),
                             "; the job times ring, rabenseifner (a state of the host chooses "
                             "each, or prices it within 2.5x of its choice)"))
      << selector->Explain(OpKind::kAllReduce, 256 << 10, *peers);
}

// Prices each algorithm of its list alike for every collective and size; chooses the cheapest.
class PriceListTuner final : public Tuner {
 public:
  explicit PriceListTuner(std::vector<TunerChoice> prices) : prices_(std::move(prices)) {}
  TunerChoice Choose(OpKind, size_t, const TuningShape&) const override {
    return *std::min_element(prices_.begin(), prices_.end(), [](const auto& a, const auto& b) {
      return a.predicted_s < b.predicted_s;
    });
  }
  double Predict(AlgorithmId algorithm, OpKind, size_t, const TuningShape&) const override {
    for (const TunerChoice& price : prices_) {
      if (price.algorithm == algorithm) return price.predicted_s;
    }
    return -1;
  }
  std::vector<TunerChoice> Priced(OpKind, size_t, const TuningShape&) const override {
    return prices_;
  }
  std::string Explain(OpKind, size_t, const TuningShape&) const override { return "price list"; }

 private:
  std::vector<TunerChoice> prices_;
};

// Where every rank shares the host (the trials can run), an algorithm a state prices within
// kNearFactor of its choice contends too: after the states' choices, nearest first. Across hosts
// only the states' disagreements count, and a state alone contends with nothing beyond 2.5x, nor
// anything under 5 us.
TEST(Selector, TheAlgorithmsPricedNearAStatesChoiceContendOnOneHost) {
  const std::unique_ptr<Peers> one_host_peers = OneHostPeers();
  ASSERT_NE(one_host_peers, nullptr);
  const Peers& one_host = *one_host_peers;
  const auto two_hosts = FakePeers({"a", "b"}, 0);
  const auto first =
      std::make_shared<PriceListTuner>(std::vector<TunerChoice>{{AlgorithmId::kShmDirect, 100e-6},
                                                                {AlgorithmId::kCmaDirect, 240e-6},
                                                                {AlgorithmId::kRing, 300e-6}});
  const auto second = std::make_shared<PriceListTuner>(
      std::vector<TunerChoice>{{AlgorithmId::kShmDirect, 100e-6},
                               {AlgorithmId::kCmaDirect, 90e-6},
                               {AlgorithmId::kRabenseifner, 200e-6}});
  const auto contenders = [](const AlgorithmSelector::Choice& choice) {
    return std::vector<AlgorithmId>(choice.contenders.begin(),
                                    choice.contenders.begin() + choice.contender_count);
  };
  // A selector belongs to one communicator (it keeps its decisions): one per layout.
  const auto choose = [](std::vector<std::shared_ptr<const Tuner>> tuners, const Peers& peers) {
    AlgorithmSelector selector;
    selector.SetTuners(std::move(tuners));
    return selector.Choose(OpKind::kAllReduce, 1 << 20, peers);
  };
  const AlgorithmSelector::Choice here = choose({first, second}, one_host);
  EXPECT_EQ(here.algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(contenders(here),
            (std::vector<AlgorithmId>{AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect,
                                      AlgorithmId::kRabenseifner}));
  EXPECT_DOUBLE_EQ(here.fastest_s, 90e-6);
  EXPECT_EQ(contenders(choose({first, second}, *two_hosts)),
            (std::vector<AlgorithmId>{AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect}));
  EXPECT_EQ(contenders(choose({first}, one_host)),
            (std::vector<AlgorithmId>{AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect}));
  EXPECT_EQ(contenders(choose({first}, *two_hosts)), std::vector<AlgorithmId>{});
  // Priced under kMinContestedSeconds nothing contends, near or chosen by another state: the
  // bookkeeping would cost more than the trials could find.
  const auto cheap = std::make_shared<PriceListTuner>(
      std::vector<TunerChoice>{{AlgorithmId::kShmDirect, 1e-6}, {AlgorithmId::kCmaDirect, 2e-6}});
  const auto cheap_other = std::make_shared<PriceListTuner>(
      std::vector<TunerChoice>{{AlgorithmId::kShmDirect, 3e-6}, {AlgorithmId::kCmaDirect, 2e-6}});
  EXPECT_EQ(contenders(choose({cheap}, one_host)), std::vector<AlgorithmId>{});
  EXPECT_EQ(contenders(choose({cheap, cheap_other}, one_host)), std::vector<AlgorithmId>{});
}

// A round of trials comes once 64 collectives with contenders (as few as 8 where each is priced at
// 4 ms or more), doubling to 8 times that as rounds go by, have run since the last (or the first)
// and added up to kRoundEverySeconds as priced: a block of trials of each challenger, 1 ms as
// priced, 4 to 10 collectives, then the one that decides. Each size keeps its own rounds.
TEST(AlgorithmTrials, ARoundTriesEachChallengerInABlockThenDecides) {
  using Role = AlgorithmTrials::Role;
  AlgorithmSelector::Choice choice;
  choice.algorithm = AlgorithmId::kShmDirect;
  choice.contenders = {AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect};
  choice.contender_count = 2;
  choice.fastest_s = 4e-3;
  AlgorithmSelector::Choice agreed = choice;
  agreed.contender_count = 0;
  AlgorithmSelector::Choice fast = choice;
  fast.fastest_s = 1e-4;

  AlgorithmTrials off;
  EXPECT_EQ(off.Next(OpKind::kAllReduce, 1 << 20, choice).role, Role::kFixed);
  AlgorithmTrials trials(true);
  EXPECT_EQ(trials.Next(OpKind::kAllReduce, 1 << 20, agreed).role, Role::kFixed);
  // A trial as 10 + its place, another role as itself.
  const auto next = [&](size_t bytes, const AlgorithmSelector::Choice& of) {
    const AlgorithmTrials::Plan plan = trials.Next(OpKind::kAllReduce, bytes, of);
    return plan.role == Role::kTrial ? 10 + plan.trial : static_cast<int>(plan.role);
  };
  const int kDecide = static_cast<int>(Role::kDecide);
  const int kIncumbent = static_cast<int>(Role::kIncumbent);
  for (int round = 0; round < 5; ++round) {
    // 4 ms each: the count decides (the one that decided counts); a block of 4.
    const int calls = std::min(8 << round, 64);
    for (int i = round == 0 ? 0 : 1; i < calls; ++i) {
      EXPECT_EQ(next(1 << 20, choice), kIncumbent) << round << " " << i;
    }
    EXPECT_EQ(next(1 << 20, choice), 10) << round;
    EXPECT_EQ(next(1 << 20, choice), 11) << round;
    EXPECT_EQ(next(1 << 20, choice), 12) << round;
    EXPECT_EQ(next(1 << 20, choice), 13) << round;
    EXPECT_EQ(next(1 << 20, choice), kDecide) << round;
  }
  // Priced at 0.1 ms, 50 collectives reach 5 ms, but a round waits for 64; a block of 10.
  for (int i = 0; i < 64; ++i) EXPECT_EQ(next(2 << 20, fast), kIncumbent) << i;
  for (int trial = 0; trial < 10; ++trial) EXPECT_EQ(next(2 << 20, fast), 10 + trial);
  EXPECT_EQ(next(2 << 20, fast), kDecide);
  // Priced at 0.2 ms: blocks of 5.
  AlgorithmSelector::Choice middle = choice;
  middle.fastest_s = 2e-4;
  EXPECT_EQ(AlgorithmTrials::TimesPerContender(middle), 5);
  // Between 0.5 and 4 ms, the first round comes after 32 ms as priced, the first half cold.
  EXPECT_EQ(AlgorithmTrials::CallsBeforeRound(0, 1e-3), 32);
  EXPECT_EQ(AlgorithmTrials::ColdCalls(1e-3), 16);
  EXPECT_EQ(AlgorithmTrials::CallsBeforeRound(2, 1e-3), 128);
  EXPECT_EQ(AlgorithmTrials::ColdCalls(25e-3), 4);
}

// The trials weigh times in and out of place apart; in place is NCCL's: an all-gather's input
// its rank's block of the output, a reduce-scatter's output its block of the input.
TEST(AlgorithmTrials, TellInPlaceFromOutOfPlaceAsNcclDoes) {
  std::vector<float> buffer(4 * 8), other(4 * 8);
  const auto in_place = [](OpKind kind, const float* send, float* recv) {
    CollectiveArgs args;
    args.kind = kind;
    args.send = send;
    args.recv = recv;
    args.count = 8;
    return args.in_place(4);
  };
  float* whole = buffer.data();
  EXPECT_TRUE(in_place(OpKind::kAllGather, whole + 2 * 8, whole));  // rank 2's block
  EXPECT_FALSE(in_place(OpKind::kAllGather, other.data(), whole));
  EXPECT_TRUE(in_place(OpKind::kReduceScatter, whole, whole + 3 * 8));  // rank 3's block
  EXPECT_FALSE(in_place(OpKind::kReduceScatter, whole, other.data()));
  EXPECT_TRUE(in_place(OpKind::kAllReduce, whole, whole));
  EXPECT_FALSE(in_place(OpKind::kAllReduce, whole + 8, whole));  // right after the count
}

// A round's trials run the contenders other than the incumbent (before any round, the first
// state's choice), a block each.
TEST(AlgorithmTrials, TheTrialsRunEachChallengerInABlock) {
  using Role = AlgorithmTrials::Role;
  AlgorithmSelector::Choice choice;
  choice.algorithm = AlgorithmId::kCmaDirect;
  choice.contenders = {AlgorithmId::kCmaDirect, AlgorithmId::kShmDirect, AlgorithmId::kRing};
  choice.contender_count = 3;
  choice.fastest_s = 5e-4;  // blocks of 4
  const AlgorithmTrials trials(true);
  const auto runs = [&](Role role, int trial) {
    return trials.Algorithm(OpKind::kAllGather, 1 << 20, choice, {role, trial});
  };
  EXPECT_EQ(runs(Role::kIncumbent, 0), AlgorithmId::kCmaDirect);
  EXPECT_EQ(runs(Role::kDecide, 0), AlgorithmId::kCmaDirect);
  EXPECT_EQ(runs(Role::kTrial, 0), AlgorithmId::kShmDirect);
  EXPECT_EQ(runs(Role::kTrial, 3), AlgorithmId::kShmDirect);
  EXPECT_EQ(runs(Role::kTrial, 4), AlgorithmId::kRing);
  EXPECT_EQ(runs(Role::kTrial, 7), AlgorithmId::kRing);
  EXPECT_EQ(trials.Found(OpKind::kAllGather, 1 << 20), std::nullopt);
}

// The decisions, on one rank with synthetic times: the incumbent's mean over its collectives
// since the round before (past a size's first 32, cold) against the mean of each challenger's
// block but its first two (the switch). A collective that starts long after the one before ended
// (the caller's own work) is timed from its own start.
TEST(AlgorithmTrials, TheIncumbentsMeanMeetsEachChallengersBlock) {
  using Role = AlgorithmTrials::Role;
  const std::unique_ptr<Peers> peers = OneHostPeers();
  ASSERT_NE(peers, nullptr);
  AlgorithmSelector::Choice choice;
  choice.algorithm = AlgorithmId::kCmaDirect;
  choice.contenders = {AlgorithmId::kCmaDirect, AlgorithmId::kShmDirect};
  choice.contender_count = 2;
  choice.fastest_s = 2.5e-4;  // blocks of 4; gaps from 2.5 ms
  ASSERT_EQ(AlgorithmTrials::TimesPerContender(choice), 4);
  constexpr OpKind kKind = OpKind::kAllGather;
  constexpr size_t kBytes = 1 << 20;
  AlgorithmTrials trials(true);
  uint64_t seq = 0;
  double now = 1;
  int calls = 0;
  // Runs collectives as CollectiveOp::Run does through `rounds` more decisions, each taking the
  // seconds `took` gives for its algorithm, role and place in the run, in place where `in_place`
  // (if any) says so, and every 8th of the incumbent's starting `incumbent_gap` after the one
  // before ended; returns the algorithm found then.
  using Took = std::function<double(AlgorithmId, const AlgorithmTrials::Plan&, int)>;
  using InPlace = std::function<bool(const AlgorithmTrials::Plan&, int)>;
  const auto run = [&](int rounds, const Took& took, double incumbent_gap = 0,
                       const InPlace& in_place = {}) {
    for (int i = 0; rounds > 0; ++i) {
      const AlgorithmTrials::Plan plan = trials.Next(kKind, kBytes, choice);
      if (plan.role == Role::kDecide) {
        EXPECT_TRUE(
            trials.Decide(kKind, kBytes, choice, *peers, Deadline::In(Scaled(absl::Seconds(10))))
                .ok());
        --rounds;
      }
      const AlgorithmId algorithm = trials.Algorithm(kKind, kBytes, choice, plan);
      const double start = now + (plan.role == Role::kIncumbent && i % 8 == 0 ? incumbent_gap : 0);
      now = start + took(algorithm, plan, i);
      if (plan.role != Role::kFixed) {
        trials.Record(kKind, kBytes, choice, plan, in_place && in_place(plan, i), seq, start, now);
      }
      ++seq;
      ++calls;
    }
    return trials.Found(kKind, kBytes);
  };
  const auto steady = [](double cma, double shm) {
    return [cma, shm](AlgorithmId algorithm, const AlgorithmTrials::Plan&, int) {
      return algorithm == AlgorithmId::kCmaDirect ? cma : shm;
    };
  };
  // cma_direct 2 ms but 50 ms each of its first 32 (cold, not counted), shm_direct 1 ms: the
  // first round, after 64, takes shm_direct.
  const auto cold = [](AlgorithmId algorithm, const AlgorithmTrials::Plan&, int i) {
    if (algorithm == AlgorithmId::kCmaDirect) return i < 32 ? 50e-3 : 2e-3;
    return 1e-3;
  };
  EXPECT_EQ(run(1, cold), AlgorithmId::kShmDirect);
  EXPECT_EQ(calls, 64 + 4 + 1);
  // shm_direct slows to 3 ms: the next round, 128 later, takes cma_direct (2 ms).
  EXPECT_EQ(run(1, steady(2e-3, 3e-3)), AlgorithmId::kCmaDirect);
  EXPECT_EQ(calls, 69 + 127 + 4 + 1);
  // A block's first trials pay for the switch: the first 100 ms, and the second 20 for what the
  // first left it. The rest of shm_direct's block (1 ms) beats cma_direct.
  const auto switching = [](AlgorithmId algorithm, const AlgorithmTrials::Plan& plan, int) {
    if (algorithm == AlgorithmId::kCmaDirect) return 2e-3;
    if (plan.role != Role::kTrial) return 1e-3;
    return plan.trial == 0 ? 100e-3 : plan.trial == 1 ? 20e-3 : 1e-3;
  };
  EXPECT_EQ(run(1, switching), AlgorithmId::kShmDirect);
  // shm_direct 1 ms, cma_direct 1.5 ms, the caller working 50 ms before every 8th incumbent:
  // timed from their own starts, shm_direct stays (from the ends before, cma_direct's block would
  // win).
  EXPECT_EQ(run(1, steady(1.5e-3, 1e-3), 50e-3), AlgorithmId::kShmDirect);
  EXPECT_EQ(run(1, steady(1e-3, 1.5e-3), 50e-3), AlgorithmId::kCmaDirect);
  // Times in and out of place: (cma_direct, shm_direct) each.
  const auto placed = [](double cma_out, double shm_out, double cma_in, double shm_in,
                         const InPlace& in_place) {
    return [=](AlgorithmId algorithm, const AlgorithmTrials::Plan& plan, int i) {
      const bool cma = algorithm == AlgorithmId::kCmaDirect;
      return in_place(plan, i) ? (cma ? cma_in : shm_in) : (cma ? cma_out : shm_out);
    };
  };
  // The incumbent out of place, shm_direct's block in place, where it beats cma_direct out of
  // place (1.5 ms against 2) but not in place (1): its last block out of place prices it for the
  // incumbent's collectives (1.5x cma_direct's, as they are now: 3 ms), and cma_direct stays.
  const InPlace trials_in_place = [](const AlgorithmTrials::Plan& plan, int) {
    return plan.role == Role::kTrial;
  };
  EXPECT_EQ(run(1, placed(2e-3, 3e-3, 1e-3, 1.5e-3, trials_in_place), 0, trials_in_place),
            AlgorithmId::kCmaDirect);
  // In and out of place by turns, shm_direct's block is weighed as the incumbent's collectives
  // were: 1.25 ms for shm_direct (1 out of place, 1.5 in place) against 1.5 for cma_direct (2,
  // 1).
  const InPlace by_turns = [](const AlgorithmTrials::Plan&, int i) { return i % 2 == 1; };
  EXPECT_EQ(run(1, placed(2e-3, 1e-3, 1e-3, 1.5e-3, by_turns), 0, by_turns),
            AlgorithmId::kShmDirect);
  // shm_direct slows to 4 ms in place, and cma_direct's block is in place alone: out of place,
  // its block of the round before prices it, as it compared there with shm_direct, the
  // challenger then (2x). 1.5 ms for cma_direct (2 out of place, 1 in place) against 2.5.
  const InPlace block_in_place = [](const AlgorithmTrials::Plan& plan, int i) {
    return plan.role == Role::kTrial || i % 2 == 1;
  };
  EXPECT_EQ(run(1, placed(2e-3, 1e-3, 1e-3, 4e-3, block_in_place), 0, block_in_place),
            AlgorithmId::kCmaDirect);
  // shm_direct's block out of place (3 ms), in a round whose collectives were all in place:
  // nothing to compare it with there, so the next round's collectives out of place (cma_direct, 2
  // ms) are, where its block is in place (0.5). 1.75 ms for shm_direct against 1.5, not the 0.75
  // that its ratio out of place from before (0.5x) would make.
  const InPlace block_out_of_place = [](const AlgorithmTrials::Plan& plan, int) {
    return plan.role != Role::kTrial;
  };
  const auto shm_out_3 = [&](const InPlace& in_place) {
    return placed(2e-3, 3e-3, 1e-3, 0.5e-3, in_place);
  };
  EXPECT_EQ(run(1, shm_out_3(block_out_of_place), 0, block_out_of_place), AlgorithmId::kCmaDirect);
  EXPECT_EQ(run(1, shm_out_3(block_in_place), 0, block_in_place), AlgorithmId::kCmaDirect);
}

// Runs collectives through `rounds` rounds of `choice`'s trials on one rank, the one numbered `seq`
// starting `gap(seq)` after the one before ended, taking `took(algorithm, seq)`, and in place where
// `in_place(seq)` (where given); returns the algorithm found, and adds to `ran` (where given) what
// each round's trials ran.
std::optional<AlgorithmId> Rounds(const AlgorithmSelector::Choice& choice, int rounds,
                                  const std::function<double(uint64_t)>& gap,
                                  const std::function<double(AlgorithmId, uint64_t)>& took,
                                  std::vector<std::vector<AlgorithmId>>* ran = nullptr,
                                  const std::function<bool(uint64_t)>& in_place = {}) {
  using Role = AlgorithmTrials::Role;
  const std::unique_ptr<Peers> peers = OneHostPeers();
  EXPECT_NE(peers, nullptr);
  if (peers == nullptr) return std::nullopt;
  constexpr OpKind kKind = OpKind::kAllReduce;
  constexpr size_t kBytes = size_t{64} << 20;
  AlgorithmTrials trials(true);
  double now = 1;
  std::vector<AlgorithmId> round;
  for (uint64_t seq = 0;; ++seq) {
    const AlgorithmTrials::Plan plan = trials.Next(kKind, kBytes, choice);
    if (plan.role == Role::kDecide) {
      EXPECT_TRUE(
          trials.Decide(kKind, kBytes, choice, *peers, Deadline::In(Scaled(absl::Seconds(10))))
              .ok());
      if (ran != nullptr) ran->push_back(std::exchange(round, {}));
      if (--rounds == 0) return trials.Found(kKind, kBytes);
    }
    EXPECT_NE(plan.role, Role::kFixed);
    if (plan.role == Role::kFixed) return std::nullopt;
    const AlgorithmId algorithm = trials.Algorithm(kKind, kBytes, choice, plan);
    if (plan.role == Role::kTrial) round.push_back(algorithm);
    const double start = now + gap(seq);
    now = start + took(algorithm, seq);
    if (plan.role != Role::kFixed) {
      trials.Record(kKind, kBytes, choice, plan, in_place && in_place(seq), seq, start, now);
    }
  }
}

// Large collectives, priced at 25 ms: the first round after 8 (the first 4 cold), blocks of 4.
AlgorithmSelector::Choice LargeChoice() {
  AlgorithmSelector::Choice choice;
  choice.algorithm = AlgorithmId::kShmDirect;
  choice.contenders = {AlgorithmId::kShmDirect, AlgorithmId::kCmaDirect};
  choice.contender_count = 2;
  choice.fastest_s = 25e-3;
  return choice;
}

// Between a benchmark's loops the caller checks and refills its buffers, some 250 ms for a
// 256 MiB all-reduce: under 10x its price, but the caller's time, not the collective's.
TEST(AlgorithmTrials, TheCallersWorkBetweenLargeCollectivesIsNotCharged) {
  const auto check_before_7th = [](uint64_t seq) { return seq == 6 ? 0.2 : 0; };
  const auto shm_faster = [](AlgorithmId algorithm, uint64_t) {
    return algorithm == AlgorithmId::kShmDirect ? 25e-3 : 28e-3;
  };
  EXPECT_EQ(Rounds(LargeChoice(), 1, check_before_7th, shm_faster), AlgorithmId::kShmDirect);
}

// A loop's first collective waits on the ranks' skew, which the ones after it hide (a 64 MiB
// all-reduce by shm_direct took 18 ms alone, 11-12 in loops of 5): the incumbent's collectives
// that followed the one before meet the challenger's block, which follow each other, and the
// loops' first stay out.
TEST(AlgorithmTrials, ALoopsFirstCollectiveMeetsOnlyItsLike) {
  const auto loops_of_4 = [](uint64_t seq) { return seq % 4 == 0 ? 0.3 : 0; };
  const auto loop_start_slower = [](AlgorithmId algorithm, uint64_t seq) {
    if (algorithm == AlgorithmId::kCmaDirect) return 23e-3;
    return seq % 4 == 0 ? 36e-3 : 22e-3;
  };
  EXPECT_EQ(Rounds(LargeChoice(), 1, loops_of_4, loop_start_slower), AlgorithmId::kShmDirect);
}

// A loop's first collectives wait on the ranks' skew, which a block within a loop does not: in a
// placement where the round's collectives were all loops' first, the block is not priced against
// them. Here the round's two in place (the 7th and 8th) took 40 ms as loops' first, and the
// block's counted two (the 11th out of place, the 12th in place) cma_direct's 17 and 25 ms, where
// shm_direct takes 17 either way within a loop: weighed against the loops' first, cma_direct's
// in place would come to 0.63x and win.
TEST(AlgorithmTrials, ABlockIsNotPricedAgainstLoopsFirstCollectivesAlone) {
  const auto loop_first = [](uint64_t seq) { return seq == 6 || seq == 7; };
  const auto in_place = [&](uint64_t seq) { return loop_first(seq) || seq == 11; };
  const auto gaps = [&](uint64_t seq) { return loop_first(seq) ? 5e-3 : 0; };
  const auto took = [&](AlgorithmId algorithm, uint64_t seq) {
    if (loop_first(seq)) return 40e-3;
    return algorithm == AlgorithmId::kCmaDirect && in_place(seq) ? 25e-3 : 17e-3;
  };
  EXPECT_EQ(Rounds(LargeChoice(), 1, gaps, took, nullptr, in_place), AlgorithmId::kShmDirect);
}

// The collective that decides runs after the ranks agreed, without the skew the agreement
// absorbed: it is no sample of the incumbent's (here a stall of 1 s in it would otherwise put
// shm_direct's mean over the next round's window at 76 ms, past cma_direct's 20).
TEST(AlgorithmTrials, ADecisionsOwnCollectiveIsNoSample) {
  const auto no_gaps = [](uint64_t) { return 0.0; };
  uint64_t ran = 0;
  const auto stall_in_the_decision = [&ran](AlgorithmId algorithm, uint64_t seq) {
    ran = seq + 1;
    if (algorithm == AlgorithmId::kCmaDirect) return 20e-3;
    return seq == 12 ? 1.0 : 17e-3;
  };
  EXPECT_EQ(Rounds(LargeChoice(), 1, no_gaps, stall_in_the_decision), AlgorithmId::kShmDirect);
  EXPECT_EQ(ran, 12);  // the 13th collective decides the first round
  EXPECT_EQ(Rounds(LargeChoice(), 2, no_gaps, stall_in_the_decision), AlgorithmId::kShmDirect);
}

// The collective after a decision follows the decision's own, as a loop's do, and is weighed as
// one of those: here it is the second round's only one in place (the 14th; the round's block is
// the 29th to 32nd, in place from the 31st), where cma_direct takes 10 ms against shm_direct's 17.
TEST(AlgorithmTrials, TheCollectiveAfterADecisionFollowsIt) {
  const auto no_gaps = [](uint64_t) { return 0.0; };
  const auto in_place = [](uint64_t seq) { return seq == 13 || seq >= 30; };
  const auto cma_faster_in_place = [&](AlgorithmId algorithm, uint64_t seq) {
    return algorithm == AlgorithmId::kCmaDirect && in_place(seq) ? 10e-3 : 17e-3;
  };
  EXPECT_EQ(Rounds(LargeChoice(), 2, no_gaps, cma_faster_in_place, nullptr, in_place),
            AlgorithmId::kCmaDirect);
}

// A challenger that took twice the incumbent's time or more sits out the next round (its trials
// run the incumbent), then twice as many as the time before for each such round in a row.
TEST(AlgorithmTrials, AChallengerFarBehindSitsOutRounds) {
  const auto no_gaps = [](uint64_t) { return 0.0; };
  const auto cma_3x = [](AlgorithmId algorithm, uint64_t) {
    return algorithm == AlgorithmId::kCmaDirect ? 75e-3 : 25e-3;
  };
  std::vector<std::vector<AlgorithmId>> ran;
  EXPECT_EQ(Rounds(LargeChoice(), 8, no_gaps, cma_3x, &ran), AlgorithmId::kShmDirect);
  const std::vector<AlgorithmId> cma(4, AlgorithmId::kCmaDirect), shm(4, AlgorithmId::kShmDirect);
  EXPECT_EQ(ran, (std::vector<std::vector<AlgorithmId>>{cma, shm, cma, shm, shm, cma, shm, shm}));
  // Within 2x, it runs its block every round.
  const auto cma_slower = [](AlgorithmId algorithm, uint64_t) {
    return algorithm == AlgorithmId::kCmaDirect ? 45e-3 : 25e-3;
  };
  ran.clear();
  EXPECT_EQ(Rounds(LargeChoice(), 3, no_gaps, cma_slower, &ran), AlgorithmId::kShmDirect);
  EXPECT_EQ(ran, (std::vector<std::vector<AlgorithmId>>{cma, cma, cma}));
}

TEST(Selector, KnowsTheHierarchicalNames) {
  EXPECT_TRUE(AlgorithmSelector::Create("hier").ok());
  EXPECT_TRUE(AlgorithmSelector::Create("all_gather=hierarchical").ok());
  absl::StatusOr<AlgorithmSelector> bad = AlgorithmSelector::Create("hierarchy");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "hierarchical")) << bad.status();
  EXPECT_FALSE(AlgorithmSelector::Create("all_to_all=hierarchical").ok());
}

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(cache_dir_.path().empty());
    ASSERT_FALSE(store_dir_.path().empty());
    setenv("WEFT_CACHE_DIR", cache_.c_str(), 1);
    unsetenv("WEFT_TUNING_FILE");
  }
  void TearDown() override {
    unsetenv("WEFT_CACHE_DIR");
    unsetenv("WEFT_TUNING_FILE");
  }
  absl::StatusOr<std::vector<CostModel>> LoadStates(const std::vector<std::string>& hosts) {
    FileStore store(store_dir_.path());
    auto peers = FakePeers(hosts, 0);
    return LoadOrCalibrate(*peers, store, Deadline::In(Scaled(absl::Seconds(10))));
  }
  // The model of the state a job starts in.
  absl::StatusOr<CostModel> Load(const std::vector<std::string>& hosts) {
    absl::StatusOr<std::vector<CostModel>> states = LoadStates(hosts);
    if (!states.ok()) return states.status();
    EXPECT_EQ(states->size(), 1u);
    return states->front();
  }

  const testing::TempDir cache_dir_{"tuner-test"};
  const testing::TempDir store_dir_{"tuner-test"};
  const std::string& cache_ = cache_dir_.path();
};

TEST_F(Calibration, ATuningFileIsTheModelAndNothingIsCached) {
  const std::string file = cache_ + "/given.txt";
  std::ofstream(file) << kModel;
  setenv("WEFT_TUNING_FILE", file.c_str(), 1);
  absl::StatusOr<CostModel> model = Load({"a"});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->source(), file);
  EXPECT_DOUBLE_EQ(model->Get("net", 2).alpha_us, 50);
  EXPECT_NE(access(TuningCachePath().c_str(), F_OK), 0);
}

// A list of files: the host's states, the first the one a job starts in. Nothing is cached.
TEST_F(Calibration, AListOfTuningFilesNamesTheHostsStates) {
  const std::string fast = cache_ + "/fast.txt", slow = cache_ + "/slow.txt";
  std::ofstream(fast) << kModel;
  std::ofstream(slow) << kModel << "net.alpha_us 500\n";
  setenv("WEFT_TUNING_FILE", (fast + ":" + slow).c_str(), 1);
  absl::StatusOr<std::vector<CostModel>> states = LoadStates({"a"});
  ASSERT_TRUE(states.ok()) << states.status();
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ(states->front().source(), fast);
  EXPECT_DOUBLE_EQ(states->at(0).Get("net", 2).alpha_us, 50);
  EXPECT_DOUBLE_EQ(states->at(1).Get("net", 2).alpha_us, 500);
  EXPECT_NE(access(TuningCachePath().c_str(), F_OK), 0);

  setenv("WEFT_TUNING_FILE", (fast + ":" + cache_ + "/missing.txt").c_str(), 1);
  states = LoadStates({"a"});
  ASSERT_FALSE(states.ok());
  EXPECT_TRUE(absl::StrContains(states.status().message(), "missing.txt")) << states.status();
}

// A copy of the host's cache serves as a tuning file, if the algorithms are still those it was
// measured with.
TEST_F(Calibration, ATuningFileMayBeACopyOfACache) {
  const std::string file = cache_ + "/copy.txt";
  std::ofstream(file) << TuningCacheRevisionLine() << kModel;
  setenv("WEFT_TUNING_FILE", file.c_str(), 1);
  absl::StatusOr<CostModel> model = Load({"a"});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_DOUBLE_EQ(model->Get("net", 2).alpha_us, 50);
  // Errors still name the file's own lines.
  std::ofstream(file) << TuningCacheRevisionLine() << "shm.gbps fast\n";
  model = Load({"a"});
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::StrContains(model.status().message(), "copy.txt:2")) << model.status();

  std::ofstream(file) << "weft.algorithms_revision 1\n" << kModel;
  model = Load({"a"});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(model.status().message(), "another revision")) << model.status();
}

TEST_F(Calibration, ABrokenTuningFileFailsCreationWithItsLine) {
  const std::string file = cache_ + "/broken.txt";
  std::ofstream(file) << "shm.gbps 4\nshm.gbps fast\n";
  setenv("WEFT_TUNING_FILE", file.c_str(), 1);
  absl::StatusOr<CostModel> model = Load({"a"});
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::StrContains(model.status().message(), "broken.txt:2")) << model.status();
}

TEST_F(Calibration, TheHostCacheIsReadWhenItCoversTheCommunicator) {
  EXPECT_TRUE(absl::StartsWith(TuningCachePath(), cache_ + "/tuning-"));
  std::ofstream(TuningCachePath()) << TuningCacheRevisionLine() << kModel;
  absl::StatusOr<CostModel> model = Load({"a"});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->source(), TuningCachePath());
  EXPECT_NEAR(model->DirectSeconds("cma_direct.all_reduce", 2, 0), 10e-6, 1e-12);
}

// Its prices are those of algorithms that have changed since.
TEST_F(Calibration, ACacheOfAnotherRevisionOfTheAlgorithmsIsNotRead) {
  for (const std::string& first_line :
       {std::string("weft.algorithms_revision 1\n"), std::string("# weft tuning\n")}) {
    std::ofstream(TuningCachePath()) << first_line << kModel;
    absl::StatusOr<CostModel> model = Load({"a"});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->source(), "built-in defaults") << first_line;
  }
}

TEST_F(Calibration, EveryRankMustAgreeOnSharedBuffers) {
  FileStore store(store_dir_.path());
  ASSERT_TRUE(store.Set("tuning/plan", "- shared_buffers").ok());  // as rank 0 would say
  auto peers = FakePeers({"a", "a"}, 1);
  absl::StatusOr<std::vector<CostModel>> model =
      LoadOrCalibrate(*peers, store, Deadline::In(Scaled(absl::Seconds(10))));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(model.status().message(), "WEFT_SHARED_BUFFERS")) << model.status();
}

TEST_F(Calibration, ADeadlineTooShortToCalibrateKeepsTheDefaults) {
  // Two nodes: the network class and the anchors are missing. Ten seconds (a low WEFT_TIMEOUT)
  // leave no room to measure them: nothing is measured or cached, and every rank is told so.
  FileStore store(store_dir_.path());
  auto peers = FakePeers({"a", "b"}, 0);
  absl::StatusOr<std::vector<CostModel>> model =
      LoadOrCalibrate(*peers, store, Deadline::In(Scaled(absl::Seconds(10))));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->front().source(), "built-in defaults");
  EXPECT_NE(access(TuningCachePath().c_str(), F_OK), 0);
  absl::StatusOr<std::string> plan =
      store.Get("tuning/plan", Deadline::In(Scaled(absl::Seconds(1))));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(*plan, "-");
}

TEST_F(Calibration, ASingleRankHasNothingToMeasure) {
  absl::StatusOr<CostModel> model = Load({"a"});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->source(), "built-in defaults");
  EXPECT_NE(access(TuningCachePath().c_str(), F_OK), 0);
}

// The recheck's verdicts, on a cache that prices shm_direct's 1 MiB all-reduce at 100 us.
constexpr double kCached = 100e-6;
const std::vector<double> kNear = {120e-6, 125e-6, 130e-6};
const std::vector<double> kSteadilySlower = {300e-6, 310e-6, 320e-6};

TEST(Recheck, ACacheNearTheHostStands) {
  const RecheckVerdict verdict = JudgeRecheck({kCached}, kNear, 1);
  EXPECT_EQ(verdict.stand_in, 0);
  EXPECT_FALSE(verdict.measure_again);
  EXPECT_TRUE(absl::StrContains(verdict.explanation, "stands")) << verdict.explanation;
}

TEST(Recheck, ACachePricedSlowerThanTheHostRunsNowIsMeasuredAgain) {
  const RecheckVerdict verdict = JudgeRecheck({kCached}, {60e-6, 62e-6, 90e-6}, 0.5);
  EXPECT_TRUE(verdict.measure_again);
  EXPECT_FALSE(verdict.new_state);
  // Taken while the host was disturbed, whatever the host does now, and however many states
  // are on file.
  EXPECT_TRUE(JudgeRecheck({kCached, 300e-6, 500e-6}, {60e-6, 62e-6, 90e-6}, 0.5).measure_again);
}

// The host found steadily slower than every state on file: another lasting state, measured once
// and kept as a state of its own.
TEST(Recheck, AHostSteadilySlowerThanEveryStateIsMeasuredInItsNewState) {
  // However many states are on file: the new one takes the place of the nearest (LoadOrCalibrate).
  for (const std::vector<double>& prices : {std::vector<double>{kCached},
                                            {kCached, 60e-6},
                                            std::vector<double>(kMaxHostStates, kCached)}) {
    const RecheckVerdict verdict = JudgeRecheck(prices, kSteadilySlower, 1);
    EXPECT_TRUE(verdict.measure_again);
    EXPECT_TRUE(verdict.new_state);
    EXPECT_EQ(verdict.stand_in, 0);
    EXPECT_TRUE(absl::StrContains(verdict.explanation, "lasting state")) << verdict.explanation;
  }
}

TEST(Recheck, ASlowerHostIsNotMeasuredWhenItsCoresAreSharedOrItsTimesScatter) {
  // Something else ran on the cores: this rank had half of one.
  EXPECT_FALSE(JudgeRecheck({kCached}, kSteadilySlower, 0.5).measure_again);
  EXPECT_FALSE(JudgeRecheck({kCached}, {200e-6, 300e-6, 400e-6}, 1).measure_again);
  // Far beyond any state of the host's own.
  EXPECT_FALSE(JudgeRecheck({kCached}, {10e-3, 10e-3, 10e-3}, 1).measure_again);
}

// The nearest state stands in once the cache is over 1.5x off, and nothing is measured.
TEST(Recheck, TheNearestStateOnFileStandsIn) {
  RecheckVerdict verdict = JudgeRecheck({kCached, 500e-6, 350e-6}, kSteadilySlower, 1);
  EXPECT_EQ(verdict.stand_in, 2);
  EXPECT_FALSE(verdict.measure_again);
  // The cache within 1.5x stands even with a nearer alternate.
  verdict = JudgeRecheck({kCached, 125e-6}, kNear, 1);
  EXPECT_EQ(verdict.stand_in, 0);
  EXPECT_FALSE(verdict.measure_again);
}

}  // namespace
}  // namespace weft
