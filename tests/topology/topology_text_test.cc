// The topology model's text form: CPU lists, a full round trip of detected and hand-made
// topologies, and errors that name the line.
#include "weft/topology/topology_text.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "weft/topology/cpu_list.h"
#include "weft/topology/discover.h"

namespace weft::topology {
namespace {

TEST(CpuList, FormatsRangesAndParsesThemBack) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({3}), "3");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  absl::StatusOr<CpuList> parsed = ParseCpuList(" 10-11,0-3,8,2 \n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (CpuList{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(ParseCpuList("").ok());
  for (const char* bad : {"1-", "a", "3-1", "1,,2", "-1", "70000"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
  EXPECT_TRUE(CpuListContains({0, 1, 2, 3}, {1, 3}));
  EXPECT_FALSE(CpuListContains({0, 1}, {1, 2}));
}

// Two packages, a NUMA node each, two cores of two threads per package, a GPU and a NIC on the
// second package: everything the format has a field for.
Topology TwoSocketHost() {
  Topology t;
  t.hostname = "gpu-node-7";
  t.packages = 2;
  t.numa_nodes = {{0, 0, uint64_t{64} << 30, {0, 1, 4, 5}},
                  {1, 1, uint64_t{64} << 30, {2, 3, 6, 7}}};
  t.cores = {{0, 0, {0, 4}}, {0, 0, {1, 5}}, {1, 1, {2, 6}}, {1, 1, {3, 7}}};
  t.caches = {{2, 1 << 20, {0, 4}}, {3, 32 << 20, {0, 1, 4, 5}}, {3, 32 << 20, {2, 3, 6, 7}}};
  t.pci_devices = {
      {"0000:3b:00.0", PciKind::kGpu, 0x0302, 0x10de, 0x2330, 31.5f, {2, 3, 6, 7}, {"cuda0"}},
      {"0000:5e:00.0",
       PciKind::kNic,
       0x0207,
       0x15b3,
       0x1021,
       7.876923f,
       {2, 3, 6, 7},
       {"ib0", "mlx5_0"}},
      {"0000:00:1f.2", PciKind::kOther, 0x0106, 0x8086, 0xa182, 0, {}, {}}};
  t.interfaces = {{"ib0", "0000:5e:00.0", 200000, true, false, {"10.1.0.7/16"}, {2, 3, 6, 7}},
                  {"lo", "", -1, true, true, {"127.0.0.1/8"}, {}},
                  {"veth3", "", 10000, false, false, {}, {}}};
  return t;
}

TEST(TopologyText, HandMadeTopologyRoundTrips) {
  const Topology original = TwoSocketHost();
  const std::string text = FormatTopology(original);
  absl::StatusOr<Topology> back = ParseTopology(text, "test");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_EQ(*back, original) << text << "\n---\n" << FormatTopology(*back);
  EXPECT_EQ(back->source, "test");
  Topology unsourced = *back;
  unsourced.source.clear();  // else the text gains a "# source: test" comment
  EXPECT_EQ(FormatTopology(unsourced), text);
  EXPECT_EQ(back->Gpus().size(), 1u);
  ASSERT_NE(back->NumaOf(6), nullptr);
  EXPECT_EQ(back->NumaOf(6)->os_index, 1);
  EXPECT_EQ(back->AllCpus(), (CpuList{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(TopologyText, DetectedTopologyRoundTrips) {
  absl::StatusOr<Topology> detected = Detect();
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_FALSE(detected->cores.empty());
  EXPECT_FALSE(detected->numa_nodes.empty());
  EXPECT_NE(detected->Interface("lo"), nullptr) << FormatTopology(*detected);
  absl::StatusOr<Topology> back = ParseTopology(FormatTopology(*detected), "detected");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *detected);
}

TEST(TopologyText, ErrorsNameTheLineAndTheProblem) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"", "empty"},
      {"hostname x\n", "expected 'weft-topology 1' first"},
      {"weft-topology 1\nnuma 0 package 0 memory 5\n", "line 2"},
      {"weft-topology 1\nnuma 0 package 0 memory 5\n", "no 'cpus' field"},
      {"weft-topology 1\n# c\ncore package 0 numa 0 cpus 0-x\n", "line 3"},
      {"weft-topology 1\npci 0000:00:01.0 kind tpu class 0x0 vendor 0x0 device 0x0 link 0 cpus - "
       "os -\n",
       "kind 'tpu'"},
      {"weft-topology 1\npci 0000:00:01.0 kind nic class 0x10000 vendor 0x0 device 0x0 link 0 "
       "cpus - os -\n",
       "'class'"},
      {"weft-topology 1\ninterface eth0 pci - speed 1 up 2 loopback 0 ipv4 - cpus -\n", "'up'"},
      {"weft-topology 1\nrouter r1\n", "unknown item 'router'"},
      {"weft-topology 1\ncache L2 bytes\n", "no value"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Topology> parsed = ParseTopology(c.text, "t.txt");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), c.says))
        << parsed.status() << " lacks '" << c.says << "'";
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "t.txt")) << parsed.status();
  }
}

TEST(TopologyText, MissingFileSaysHowToMakeOne) {
  absl::StatusOr<Topology> read = ReadTopologyFile("/nonexistent/weft-topo.txt");
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::StrContains(read.status().message(), "weft-info --dump")) << read.status();
}

}  // namespace
}  // namespace weft::topology
