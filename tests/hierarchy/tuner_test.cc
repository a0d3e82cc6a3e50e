// The tuner's parts in one process: the cost model's text format, the node layout and lane plan,
// the choices CostTuner makes for a given model, and the selector's WEFT_ALGO override.
#include "algorithms/tuner.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "algorithms/hierarchical_group.h"
#include "algorithms/selector.h"
#include "algorithms/tuner_model.h"
#include "gtest/gtest.h"
#include "node_layout.h"
#include "peers.h"

namespace weft {
namespace {

constexpr char kModel[] = R"(# a test machine
shm.alpha_us 2
shm.gbps 4
net.alpha_us 50   # a slow network
net.gbps 1
reduce.gbps 8
shm_direct.all_reduce.2.alpha_us 1
shm_direct.all_reduce.2.gbps 4
cma_direct.all_reduce.2.alpha_us 10
cma_direct.all_reduce.2.gbps 10
cma_direct_shared.all_reduce.alpha_us 10
cma_direct_shared.all_reduce.gbps 40
)";

CostModel TestModel() {
  CostModel model;
  EXPECT_TRUE(model.Merge(kModel, "test.txt").ok());
  return model;
}

// A communicator's view for the selector: links are never touched while choosing.
std::unique_ptr<Peers> FakePeers(const std::vector<std::string>& hosts, int rank) {
  auto peers =
      std::make_unique<Peers>(rank, static_cast<int>(hosts.size()),
                              std::vector<std::unique_ptr<Link>>(hosts.size()), nullptr, false);
  peers->SetNodes(NodeLayout(hosts, rank));
  return peers;
}

// Where both direct algorithms can run.
CommLayout TwoRanksOnOneHost() {
  CommLayout shape;
  shape.ranks = 2;
  shape.arena = shape.remote_read = true;
  return shape;
}

CommLayout TwoNodesOfTwoRanks() {
  CommLayout shape;
  shape.ranks = 4;
  shape.nodes = 2;
  shape.lanes = shape.max_local = 2;
  return shape;
}

TEST(CostModel, ParsesEntriesWithAndWithoutGroupSizes) {
  CostModel model;
  ASSERT_TRUE(model
                  .Merge("shm.alpha_us 3\nshm.gbps 5\nshm.4.alpha_us 9\nshm.4.gbps 2\n"
                         "shm_direct.broadcast.3.alpha_us 1\nshm_direct.broadcast.3.gbps 6\n",
                         "f.txt")
                  .ok());
  EXPECT_EQ(model.source(), "f.txt");
  EXPECT_EQ(model.Get("shm", 4).alpha_us, 9);
  EXPECT_EQ(model.Get("shm", 2).alpha_us, 3);  // the size-less entry
  int measured = 0;
  EXPECT_EQ(model.Get("shm_direct.broadcast", 8, &measured).gbps, 6);  // the nearest size
  EXPECT_EQ(measured, 3);
  // What the file lacks keeps the built-in defaults.
  EXPECT_GT(model.Get("net", 2).alpha_us, 0);
  EXPECT_EQ(model.Get("net_flow", 2).gbps, CostModel().Get("net_flow", 2).gbps);
  EXPECT_EQ(CostModel().source(), "built-in defaults");
}

// The built-in lone flow is faster than the built-in net; a file that measured net alone lends
// it to net_flow, which is never slower, rather than mixing its network with the defaults'.
TEST(CostModel, NetFlowIsItsDefaultOrAMeasuredNet) {
  const CostModel defaults;
  EXPECT_GT(defaults.Get("net_flow", 2).gbps, defaults.Get("net", 2).gbps);
  CostModel slow;
  ASSERT_TRUE(slow.Merge("net.alpha_us 100\nnet.gbps 0.1\n", "slow.txt").ok());
  EXPECT_EQ(slow.Get("net_flow", 2).gbps, 0.1);
}

TEST(CostModel, FormatReadsBackTheSameModel) {
  const CostModel model = TestModel();
  CostModel again;
  ASSERT_TRUE(again.Merge(model.Format(), "again").ok());
  EXPECT_EQ(again.Format(), model.Format());
}

TEST(CostModel, ErrorsNameTheFileLineAndTheValidKeys) {
  CostModel model;
  const absl::Status bad = model.Merge("shm.gbps 4\nshm.alpha_us 1\nlink.gbps 3\n", "t.txt");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.message(), "t.txt:3: 'link.gbps 3': unknown class")) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "shm_direct")) << bad;
  EXPECT_TRUE(absl::StrContains(model.Merge("shm.gbps -1", "t.txt").message(), "positive"));
  EXPECT_TRUE(absl::StrContains(model.Merge("shm.4.gbps 1", "t.txt").message(),
                                "shm.4 needs both alpha_us and gbps"));
  EXPECT_TRUE(absl::StrContains(model.Merge("shm.speed 1", "t.txt").message(), "unknown field"));
  EXPECT_EQ(model.source(), "built-in defaults");  // a failed merge changes nothing
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

TEST(CostTuner, OneHostTakesTheDirectAlgorithmThatIsCheaperAtEachSize) {
  const CostTuner tuner(TestModel());
  CommLayout shape = TwoRanksOnOneHost();
  // shm_direct: 1 us + n / 4 GB/s; cma_direct: 10 us + n / 10 GB/s; they cross at 60 kB.
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 8, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 32 << 10, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 128 << 10, shape).algorithm, AlgorithmId::kCmaDirect);
  const Priced large = tuner.Choose(OpKind::kAllReduce, 64 << 20, shape);
  EXPECT_EQ(large.algorithm, AlgorithmId::kCmaDirect);
  EXPECT_NEAR(large.seconds, 10e-6 + (64 << 20) / 10e9, 1e-12);
  // On 4 ranks what the bytes add grows with the ranks; the fixed cost stays.
  shape.ranks = 4;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kCmaDirect, OpKind::kAllReduce, 1e6, shape),
              10e-6 + 2 * 1e6 / 10e9, 1e-12);
  shape.ranks = 2;
  // AllocShared buffers price cma_direct from its own class.
  shape.alloc_shared_buffers = true;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kCmaDirect, OpKind::kAllReduce, 4e6, shape),
              10e-6 + 4e6 / 40e9, 1e-12);
  shape.alloc_shared_buffers = false;
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

TEST(CostTuner, PricesTheRingWithTheFormulaOfTheSpec) {
  CommLayout shape;
  shape.ranks = 4;
  const double n = 1 << 20;
  // 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma, with shm (2 us, 4 GB/s), gamma 8 GB/s.
  EXPECT_NEAR(CostTuner(TestModel()).Predict(AlgorithmId::kRing, OpKind::kAllReduce, n, shape),
              6 * 2e-6 + 2 * 0.75 * n / 4e9 + 0.75 * n / 8e9, 1e-12);
}

TEST(CostTuner, TwoNodesOverASlowNetworkGoHierarchical) {
  const CostTuner tuner(TestModel());
  const CommLayout shape = TwoNodesOfTwoRanks();
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather}) {
    const Priced choice = tuner.Choose(kind, 64 << 20, shape);
    EXPECT_EQ(choice.algorithm, AlgorithmId::kHierarchical) << Name(kind);
    EXPECT_GT(choice.seconds, 0);
  }
  // The hierarchy halves what crosses the network: well under the ring's 3/4 of n each way.
  EXPECT_LT(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kAllReduce, 64 << 20, shape),
            0.5 * tuner.Predict(AlgorithmId::kRing, OpKind::kAllReduce, 64 << 20, shape));
  // Reduce-scatter: in the node each rank (every one a lane) sends the other lane's half (shm:
  // 2 us, 4 GB/s), its lane rank reduces it (8 GB/s); half of the lane crosses (50 us, 1 GB/s)
  // and is reduced, leaving each rank its own block.
  const double n = 64 << 20;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kReduceScatter, n, shape),
              (2e-6 + n / 2 / 4e9) + n / 2 / 8e9 + 50e-6 + n / 4 * (1 / 1e9 + 1 / 8e9), 1e-12);
  // On 3 + 1 ranks one lane: its rank takes in and reduces two whole buffers, half the buffer
  // crosses, and the two ranks without a lane get their quarter back in one more step.
  CommLayout uneven = shape;
  uneven.lanes = 1;
  uneven.max_local = 3;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kReduceScatter, n, uneven),
              (2e-6 + 2 * n / 4e9) + 2 * n / 8e9 + 50e-6 + n / 2 * (1 / 1e9 + 1 / 8e9) +
                  (2e-6 + n / 4 / 4e9),
              1e-12);
  const std::string explained = tuner.Explain(OpKind::kAllReduce, 64 << 20, shape);
  EXPECT_TRUE(absl::StrContains(explained, "hierarchical predicted")) << explained;
  EXPECT_TRUE(absl::StrContains(explained, "ring ")) << explained;
  EXPECT_TRUE(absl::StrContains(explained, "model: test.txt")) << explained;
}

// The hierarchical all-reduce pipelines 1 MiB chunks of each lane: with a core per rank the
// phases across nodes (a ring over the lane, 50 us and 1 GB/s per step, reduced at 8 GB/s) hide
// those inside them (the lane in and out of the node, 2 us and 4 GB/s each way, reduced), save
// one chunk's worth; ranks that share cores run the phases in turn, so their times add.
TEST(CostTuner, RanksSharingCoresRunTheHierarchysPhasesInTurn) {
  const CostTuner tuner(TestModel());
  CommLayout shape = TwoNodesOfTwoRanks();
  const double n = 64 << 20, lane = n / 2, chunks = 32;
  const double across = chunks * 2 * 50e-6 + 2 * 0.5 * lane / 1e9 + 0.5 * lane / 8e9;
  const double inside = 2 * (2e-6 + lane / 4e9) + lane / 8e9;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kAllReduce, n, shape),
              across + inside / chunks, 1e-12);
  shape.oversubscribed = true;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kHierarchical, OpKind::kAllReduce, n, shape),
              across + inside, 1e-12);
}

TEST(CostTuner, RabenseifnerPricesItsStepsInsideAndAcrossNodes) {
  CommLayout shape = TwoNodesOfTwoRanks();
  const CostTuner tuner(TestModel());
  const double n = 64 << 20;
  // The all-reduce's halving pairs the ranks of a node first (shm: 2 us, 4 GB/s) over half the
  // buffer; a quarter of it crosses the network (50 us, 1 GB/s); the doubling retraces both; the
  // reduction reads 3/4 of it (8 GB/s).
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
              2 * (2e-6 + 0.5 * n / 4e9 + 50e-6 + 0.25 * n / 1e9) + 0.75 * n / 8e9, 1e-12);
  // The reduce-scatter's halving and the all-gather's doubling take the same steps, and copy the
  // buffer into bit-reversed block order (8 GB/s).
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kReduceScatter, n, shape),
              2e-6 + 0.5 * n / 4e9 + 50e-6 + 0.25 * n / 1e9 + 0.75 * n / 8e9 + n / 8e9, 1e-12);
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kAllGather, n, shape),
              2e-6 + 0.5 * n / 4e9 + 50e-6 + 0.25 * n / 1e9 + n / 8e9, 1e-12);
  // Uneven nodes (3 + 1 ranks) price every step on the network.
  shape.lanes = 1;
  shape.max_local = 3;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kAllReduce, n, shape),
              4 * 50e-6 + 1.5 * n / 1e9 + 0.75 * n / 8e9, 1e-12);
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRabenseifner, OpKind::kReduceScatter, n, shape),
              2 * 50e-6 + 0.75 * n / 1e9 + 0.75 * n / 8e9 + n / 8e9, 1e-12);
}

// Recursive doubling pairs ranks at distance 1 first: over two nodes of two ranks numbered node
// by node, one exchange stays in the node (shm: 2 us, 4 GB/s) and one crosses (50 us, 1 GB/s),
// each of the whole buffer and reduced (8 GB/s). Three ranks fold on the network.
TEST(CostTuner, RecursiveDoublingCrossesTheNetworkOncePerNodeDoubling) {
  const CostTuner tuner(TestModel());
  CommLayout shape = TwoNodesOfTwoRanks();
  const double n = 4096;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRecursiveDoubling, OpKind::kAllReduce, n, shape),
              (2e-6 + n / 4e9 + n / 8e9) + (50e-6 + n / 1e9 + n / 8e9), 1e-12);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, n, shape).algorithm, AlgorithmId::kRecursiveDoubling);
  shape.ranks = 3;
  shape.lanes = 1;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kRecursiveDoubling, OpKind::kAllReduce, n, shape),
              2 * (50e-6 + n / 1e9 + n / 8e9) + 2 * (50e-6 + n / 1e9) + n / 8e9, 1e-12);
}

// The built-in defaults pick what the machines they came from run fastest: the direct algorithms
// on one host (but the tree for reduces past a few KiB), algorithms over links for small
// collectives across nodes, the hierarchy for large all-reduces there.
TEST(CostTuner, TheBuiltInDefaultsPickSensibly) {
  const CostTuner tuner{CostModel()};
  const CommLayout one_host = TwoRanksOnOneHost();
  EXPECT_EQ(tuner.Choose(OpKind::kReduce, 8, one_host).algorithm, AlgorithmId::kShmDirect);
  for (size_t bytes : {size_t{64} << 10, size_t{64} << 20}) {
    EXPECT_EQ(tuner.Choose(OpKind::kReduce, bytes, one_host).algorithm, AlgorithmId::kTree);
  }
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather,
                      OpKind::kBroadcast, OpKind::kBarrier}) {
    for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{64} << 20}) {
      const AlgorithmId id = tuner.Choose(kind, bytes, one_host).algorithm;
      EXPECT_TRUE(id == AlgorithmId::kShmDirect || id == AlgorithmId::kCmaDirect)
          << Name(kind) << " " << bytes << ": " << Name(id);
    }
  }
  const CommLayout nodes = TwoNodesOfTwoRanks();
  EXPECT_NE(tuner.Choose(OpKind::kAllReduce, 256, nodes).algorithm, AlgorithmId::kHierarchical);
  EXPECT_EQ(tuner.Choose(OpKind::kAllReduce, 64 << 20, nodes).algorithm,
            AlgorithmId::kHierarchical);
  // Broadcasts: the tree while one flow carries the buffer faster than the hierarchy's phases,
  // the hierarchy once every lane's share of the network pays.
  EXPECT_EQ(tuner.Choose(OpKind::kBroadcast, 32 << 10, nodes).algorithm, AlgorithmId::kTree);
  EXPECT_EQ(tuner.Choose(OpKind::kBroadcast, 2 << 20, nodes).algorithm, AlgorithmId::kHierarchical);
}

// Ranks that share cores reach an arena round one after another: each other rank adds a link
// step's latency to a direct algorithm, and the tree, whose steps need only a parent and a child,
// takes small broadcasts and reduces; unshared, the same layout stays on the arena.
TEST(CostTuner, RanksSharingCoresPriceTheArenaRoundsAndLetTheTreeCompete) {
  CostModel model;
  model.Set("shm", 0, {5, 5});
  model.Set("shm_direct.broadcast", 0, {1, 3});
  const CostTuner tuner{model};
  CommLayout shape;
  shape.ranks = shape.max_local = shape.lanes = 4;
  shape.arena = true;
  EXPECT_EQ(tuner.Choose(OpKind::kBroadcast, 8, shape).algorithm, AlgorithmId::kShmDirect);
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kBroadcast, 8, shape), 1e-6 + 8 / 3e9,
              1e-12);

  shape.oversubscribed = true;
  EXPECT_NEAR(tuner.Predict(AlgorithmId::kShmDirect, OpKind::kBroadcast, 8, shape),
              1e-6 + 3 * 5e-6 + 8 / 3e9, 1e-12);
  for (OpKind kind : {OpKind::kBroadcast, OpKind::kReduce}) {
    EXPECT_EQ(tuner.Choose(kind, 8, shape).algorithm, AlgorithmId::kTree) << Name(kind);
  }
  EXPECT_TRUE(absl::StrContains(tuner.Explain(OpKind::kBroadcast, 8, shape), "sharing cores"));
}

AlgorithmSelector Selector(const std::string& spec, const CommLayout& layout) {
  absl::StatusOr<AlgorithmSelector> selector = AlgorithmSelector::Create(spec);
  EXPECT_TRUE(selector.ok()) << selector.status();
  selector->SetTuner(TestModel(), layout, 1);
  return *std::move(selector);
}

TEST(Selector, WeftAlgoOverridesTheTuner) {
  const AlgorithmSelector selector =
      Selector("all_reduce=ring,broadcast=tree", TwoNodesOfTwoRanks());
  EXPECT_TRUE(selector.CheckForced(*FakePeers({"a", "a", "b", "b"}, 0), "auto").ok());
  EXPECT_EQ(selector.Choose(OpKind::kAllReduce, 64 << 20), AlgorithmId::kRing);
  EXPECT_EQ(selector.Choose(OpKind::kBroadcast, 64 << 20), AlgorithmId::kTree);
  EXPECT_EQ(selector.Choose(OpKind::kAllGather, 64 << 20), AlgorithmId::kHierarchical);
  EXPECT_GT(selector.Predict(AlgorithmId::kRing, OpKind::kAllReduce, 64 << 20), 0);
  EXPECT_TRUE(
      absl::StrContains(selector.Explain(OpKind::kAllReduce, 1024), "WEFT_ALGO forces ring"));
}

// A selector is a function of (collective, bytes) for its model and layout: asked again, or
// asked by another rank's selector, it answers the same.
TEST(Selector, ThePickIsTheSameEveryCallAndOnEveryRank) {
  const AlgorithmSelector one = Selector("", TwoRanksOnOneHost());
  const AlgorithmSelector other = Selector("", TwoRanksOnOneHost());
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather,
                      OpKind::kBroadcast, OpKind::kReduce, OpKind::kAllToAll, OpKind::kBarrier}) {
    for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 4) {
      const AlgorithmId first = one.Choose(kind, bytes);
      for (int call = 0; call < 3; ++call) {
        EXPECT_EQ(one.Choose(kind, bytes), first) << Name(kind) << " " << bytes;
        EXPECT_EQ(other.Choose(kind, bytes), first) << Name(kind) << " " << bytes;
      }
    }
  }
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
  const CommLayout layout = TwoNodesOfTwoRanks();
  const AlgorithmSelector plain = Selector("", layout);
  const AlgorithmSelector auto_only = Selector("auto", layout);
  const AlgorithmSelector mixed = Selector("auto,broadcast=tree", layout);
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kBroadcast}) {
    for (size_t bytes : {size_t{8}, size_t{64} << 20}) {
      EXPECT_EQ(auto_only.Choose(kind, bytes), plain.Choose(kind, bytes))
          << Name(kind) << " " << bytes;
    }
  }
  EXPECT_EQ(mixed.Choose(OpKind::kBroadcast, 8), AlgorithmId::kTree);
  EXPECT_EQ(mixed.Choose(OpKind::kAllReduce, 64 << 20), plain.Choose(OpKind::kAllReduce, 64 << 20));
  EXPECT_FALSE(AlgorithmSelector::Create("autotune").ok());
}

TEST(Selector, KnowsTheHierarchicalNames) {
  EXPECT_TRUE(AlgorithmSelector::Create("hier").ok());
  EXPECT_TRUE(AlgorithmSelector::Create("all_gather=hierarchical").ok());
  absl::StatusOr<AlgorithmSelector> bad = AlgorithmSelector::Create("hierarchy");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "hierarchical")) << bad.status();
  EXPECT_FALSE(AlgorithmSelector::Create("all_to_all=hierarchical").ok());
}

}  // namespace
}  // namespace weft
