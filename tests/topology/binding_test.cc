// Binding plans: which CPUs each local rank gets under every WEFT_BIND policy, and that a
// process already bound by someone else is left alone.
#include "weft/topology/binding.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::topology {
namespace {

// Two NUMA nodes of four single-thread cores; GPU 0 near node 0, GPU 1 near node 1, the NIC
// near node 1.
Topology Host(bool gpus) {
  Topology t;
  t.packages = 2;
  t.numa_nodes = {{0, 0, 0, {0, 1, 2, 3}}, {1, 1, 0, {4, 5, 6, 7}}};
  for (int cpu = 0; cpu < 8; ++cpu) t.cores.push_back({cpu / 4, cpu / 4, {cpu}});
  if (gpus) {
    t.pci_devices = {{"0000:1a:00.0", PciKind::kGpu, 0x0302, 0x10de, 1, 0, {0, 1, 2, 3}, {}},
                     {"0000:8a:00.0", PciKind::kGpu, 0x0302, 0x10de, 1, 0, {4, 5, 6, 7}, {}}};
  }
  t.interfaces = {{"lo", "", -1, true, true, {"127.0.0.1/8"}, {}},
                  {"eth0", "0000:9a:00.0", 100000, true, false, {"10.0.0.1/24"}, {4, 5, 6, 7}}};
  return t;
}

const CpuList kAll = {0, 1, 2, 3, 4, 5, 6, 7};

BindPlan Plan(const Topology& t, BindPolicy policy, int local_rank, int local_size,
              const CpuList& current = kAll, std::string nic = "") {
  return PlanBinding(t, current, BindRequest{policy, local_rank, local_size, std::move(nic)});
}

TEST(Binding, ParsesPolicies) {
  EXPECT_EQ(*ParseBindPolicy(""), BindPolicy::kOff);
  EXPECT_EQ(*ParseBindPolicy("auto"), BindPolicy::kAuto);
  EXPECT_EQ(*ParseBindPolicy("numa"), BindPolicy::kNuma);
  absl::StatusOr<BindPolicy> bad = ParseBindPolicy("socket");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "off, auto, gpu, nic, numa"));
}

TEST(Binding, OffBindsNothing) { EXPECT_FALSE(Plan(Host(true), BindPolicy::kOff, 0, 1).bind); }

TEST(Binding, GpuRanksSplitTheCoresNearTheirGpu) {
  const Topology t = Host(true);
  // Four ranks, two GPUs: ranks 0 and 2 share GPU 0's cores, 1 and 3 GPU 1's.
  EXPECT_EQ(Plan(t, BindPolicy::kGpu, 0, 4).cpus, (CpuList{0, 1}));
  EXPECT_EQ(Plan(t, BindPolicy::kGpu, 2, 4).cpus, (CpuList{2, 3}));
  EXPECT_EQ(Plan(t, BindPolicy::kGpu, 1, 4).cpus, (CpuList{4, 5}));
  const BindPlan last = Plan(t, BindPolicy::kAuto, 3, 4);
  EXPECT_TRUE(last.bind);
  EXPECT_EQ(last.cpus, (CpuList{6, 7}));
  EXPECT_TRUE(absl::StrContains(last.reason, "GPU 0000:8a:00.0")) << last.reason;
}

TEST(Binding, NicRanksShareTheCoresNearTheNic) {
  const Topology t = Host(false);
  EXPECT_EQ(Plan(t, BindPolicy::kAuto, 0, 2).cpus, (CpuList{4, 5}));
  EXPECT_EQ(Plan(t, BindPolicy::kNic, 1, 2, kAll, "eth0").cpus, (CpuList{6, 7}));
  // More ranks than cores: they all share the NIC's cores.
  EXPECT_EQ(Plan(t, BindPolicy::kNic, 5, 6).cpus, (CpuList{4, 5, 6, 7}));
  const BindPlan missing = Plan(t, BindPolicy::kNic, 0, 1, kAll, "ib0");
  EXPECT_FALSE(missing.bind);
  EXPECT_TRUE(absl::StrContains(missing.reason, "ib0")) << missing.reason;
}

TEST(Binding, NumaSplitsTheNodesInBlocks) {
  const Topology t = Host(false);
  EXPECT_EQ(Plan(t, BindPolicy::kNuma, 0, 4).cpus, (CpuList{0, 1}));
  EXPECT_EQ(Plan(t, BindPolicy::kNuma, 1, 4).cpus, (CpuList{2, 3}));
  EXPECT_EQ(Plan(t, BindPolicy::kNuma, 2, 4).cpus, (CpuList{4, 5}));
  EXPECT_EQ(Plan(t, BindPolicy::kNuma, 0, 1).cpus, (CpuList{0, 1, 2, 3}));
}

TEST(Binding, AnExistingNarrowerAffinityIsLeftAlone) {
  const BindPlan plan = Plan(Host(true), BindPolicy::kAuto, 0, 2, {4, 5});
  EXPECT_FALSE(plan.bind);
  EXPECT_TRUE(absl::StrContains(plan.reason, "already bound to CPUs 4-5")) << plan.reason;
}

TEST(Binding, AutoOnAFlatHostWithoutDevicesDoesNothing) {
  Topology t;
  t.numa_nodes = {{0, 0, 0, {0, 1}}};
  t.cores = {{0, 0, {0}}, {0, 0, {1}}};
  const BindPlan plan = PlanBinding(t, {0, 1}, BindRequest{BindPolicy::kAuto, 0, 2, ""});
  EXPECT_FALSE(plan.bind);
  EXPECT_TRUE(absl::StrContains(plan.reason, "gain nothing")) << plan.reason;
}

TEST(Binding, NicFromIfnameTakesTheFirstPlainName) {
  EXPECT_EQ(NicFromIfname("eth0,ib0"), "eth0");
  EXPECT_EQ(NicFromIfname("=ib1"), "ib1");
  EXPECT_EQ(NicFromIfname("^lo,docker"), "");
  EXPECT_EQ(NicFromIfname(""), "");
}

}  // namespace
}  // namespace weft::topology
