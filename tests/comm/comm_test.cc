// Multi-process communicator tests: real processes started by weftrun, real shared memory and
// real sockets. Each case runs one comm_worker suite over a rank count and a transport layout.
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// How the ranks reach each other: "shm" (one host, shared memory and the arena), "tcp" (all
// links over sockets), "mixed" (two pretend hosts: shm inside, tcp across).
struct Layout {
  std::string name;
  Env env;
  std::vector<std::string> worker_args;
};

Layout MakeLayout(const std::string& name) {
  if (name == "tcp") return {name, {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_SOCKET_IFNAME", "lo"}}, {}};
  // Loopback only: pretend hosts must not send to this machine's other addresses.
  if (name == "mixed") return {name, {{"WEFT_SOCKET_IFNAME", "lo"}}, {"--fake-hosts", "2"}};
  return {name, {{"WEFT_TRANSPORT", "auto"}}, {}};
}

ProcessResult RunJob(int ranks, const std::string& suite, const Layout& layout, Env extra = {},
                     int limit_s = 120) {
  limit_s *= TimeScale();
  std::vector<std::string> argv = {
      WEFTRUN,     "-n", std::to_string(ranks), "--timeout", std::to_string(limit_s), "--",
      WEFT_WORKER, suite};
  argv.insert(argv.end(), layout.worker_args.begin(), layout.worker_args.end());
  Env env = layout.env;
  env.insert(env.end(), extra.begin(), extra.end());
  env.emplace_back("WEFT_TIMEOUT", std::to_string(60 * TimeScale()));
  // Jobs that fail on purpose dump their flight recorders: here, not in /tmp for good.
  const TempDir dumps("comm-test");
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dumps.path());
  return RunProcess(argv, env, std::chrono::seconds(limit_s + 10));
}

void ExpectSuccess(const ProcessResult& result) {
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// What comm_worker's WEFT_EXPECT_ALGO is for a WEFT_ALGO value: each collective it forces, with
// the algorithm that must run it ("all_reduce=ring,reduce_scatter=ring,all_gather=ring").
std::string ExpectedAlgorithms(const std::string& spec) {
  // The collectives each bare algorithm name forces (registry.cc's Implements).
  static const std::map<std::string, std::vector<std::string>> kImplements = {
      {"ring", {"all_reduce", "reduce_scatter", "all_gather"}},
      {"rabenseifner", {"all_reduce", "reduce_scatter", "all_gather"}},
      {"recursive_doubling", {"all_reduce"}},
  };
  std::vector<std::string> expected;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (absl::StrContains(item, '=')) {
      expected.emplace_back(item);
      continue;
    }
    const auto it = kImplements.find(std::string(item));
    if (it == kImplements.end()) {
      ADD_FAILURE() << "no expectation for WEFT_ALGO=" << item;
      continue;
    }
    for (const std::string& collective : it->second) {
      expected.push_back(absl::StrCat(collective, "=", item));
    }
  }
  return absl::StrJoin(expected, ",");
}

// The environment that forces `spec` and has the workers check, from their flight recorders,
// that every forced collective ran on its algorithm.
Env Forcing(const std::string& spec) {
  // Room for every collective of the collectives suite (about 2,000), so all of them are checked.
  return {{"WEFT_ALGO", spec},
          {"WEFT_EXPECT_ALGO", ExpectedAlgorithms(spec)},
          {"WEFT_FLIGHT_RECORDER_SIZE", "16384"}};
}

// What the arena reports where ranks may not read each other's memory (registry.cc's Unusable).
constexpr const char* kCmaDenied = "cross-memory attach between the ranks is not permitted";

class Collectives : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(Collectives, EveryTypeOpAndPlacementIsExact) {
  const auto& [ranks, layout_name, algorithm] = GetParam();
  Layout layout = MakeLayout(layout_name);
  const Env extra = algorithm.empty() ? Env{} : Forcing(algorithm);
  const ProcessResult result = RunJob(ranks, "collectives", layout, extra);
  // A forced cma_direct where ptrace forbids it fails creation, saying so: skip, visibly.
  if (result.exit_code != 0 && absl::StrContains(algorithm, "cma_direct") &&
      absl::StrContains(result.output, kCmaDenied)) {
    GTEST_SKIP() << "cross-memory attach is not permitted on this machine: " << result.output;
  }
  ExpectSuccess(result);
  if (!algorithm.empty()) {
    EXPECT_TRUE(absl::StrContains(result.output, "algorithms checked:")) << result.output;
  }
}

std::string CaseName(const ::testing::TestParamInfo<Collectives::ParamType>& info) {
  const auto& [ranks, layout, algorithm] = info.param;
  return absl::StrCat(ranks, "ranks_", layout, "_", algorithm.empty() ? "default" : algorithm);
}

INSTANTIATE_TEST_SUITE_P(Shm, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values("shm"), ::testing::Values("")),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Tcp, Collectives,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8), ::testing::Values("tcp"),
                                            ::testing::Values("ring", "rabenseifner",
                                                              "recursive_doubling")),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Mixed, Collectives,
                         ::testing::Combine(::testing::Values(3, 4), ::testing::Values("mixed"),
                                            ::testing::Values("")),
                         CaseName);
// The flat algorithms where the ranks are not a power of two: the power-of-two fold with one,
// two and three folded pairs, over shared-memory links and TCP; TCP with the tuner's choice too.
INSTANTIATE_TEST_SUITE_P(FoldShm, Collectives,
                         ::testing::Combine(::testing::Values(5, 6, 7), ::testing::Values("shm"),
                                            ::testing::Values("ring", "rabenseifner",
                                                              "recursive_doubling")),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(FoldTcp, Collectives,
                         ::testing::Combine(::testing::Values(5, 6, 7), ::testing::Values("tcp"),
                                            ::testing::Values("", "ring", "rabenseifner",
                                                              "recursive_doubling")),
                         CaseName);
// Every direct-read (cross-memory attach) collective, whatever the size.
INSTANTIATE_TEST_SUITE_P(
    Cma, Collectives,
    ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values("shm"),
                       ::testing::Values("all_reduce=cma_direct,reduce_scatter=cma_direct,"
                                         "all_gather=cma_direct,broadcast=cma_direct")),
    [](const auto& info) { return absl::StrCat(std::get<0>(info.param), "ranks_shm_cma"); });
// The link algorithms over shared-memory links (no arena shortcut).
INSTANTIATE_TEST_SUITE_P(
    ShmLinks, Collectives,
    ::testing::Combine(
        ::testing::Values(3), ::testing::Values("shm"),
        ::testing::Values(
            "all_reduce=ring,reduce_scatter=ring,all_gather=ring,"
            "broadcast=tree,reduce=tree,barrier=dissemination",
            "all_reduce=rabenseifner,reduce_scatter=rabenseifner,all_gather=rabenseifner",
            "all_reduce=recursive_doubling")),
    [](const auto& info) { return absl::StrCat("3ranks_shm_links", info.index); });

// A forced algorithm that cannot run on the communicator fails its creation on every rank, naming
// the algorithm and the reason, instead of running the tuner's choice unannounced.
TEST(ForcedAlgorithms, ShmDirectOverTcpFailsNamingItAndWhy) {
  const ProcessResult result =
      RunJob(2, "collectives", MakeLayout("tcp"), {{"WEFT_ALGO", "shm_direct"}}, 60);
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output,
                                "WEFT_ALGO forces shm_direct for all_reduce, but it cannot run on "
                                "this communicator: the ranks do not share memory (transport tcp)"))
      << result.output;
}

TEST(ForcedAlgorithms, CmaDirectWhereCrossMemoryAttachIsDeniedFailsNamingItAndWhy) {
  Layout layout = MakeLayout("shm");
  layout.worker_args = {"--deny-cma"};
  const ProcessResult result = RunJob(2, "collectives", layout, {{"WEFT_ALGO", "cma_direct"}}, 60);
  if (absl::StrContains(result.output, "FAIL denying cross-memory attach")) {
    GTEST_SKIP() << "cannot deny cross-memory attach here: " << result.output;
  }
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "WEFT_ALGO forces cma_direct for all_reduce"))
      << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, kCmaDenied)) << result.output;
}

// The variable-count collectives on every small rank count over each transport layout; the
// flight recorder must show each of them, run on its algorithm.
class VCollectives : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(VCollectives, UnevenBlocksWithZerosAreExact) {
  const auto& [ranks, layout] = GetParam();
  const ProcessResult result =
      RunJob(ranks, "v_collectives", MakeLayout(layout),
             {{"WEFT_EXPECT_ALGO", "all_gather_v=ring,reduce_scatter_v=ring,all_to_all_v=pairwise"},
              {"WEFT_FLIGHT_RECORDER_SIZE", "16384"}});
  ExpectSuccess(result);
  EXPECT_TRUE(absl::StrContains(result.output, "algorithms checked:")) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Layouts, VCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "ranks_",
                                               std::get<1>(info.param));
                         });
INSTANTIATE_TEST_SUITE_P(Mixed, VCollectives,
                         ::testing::Combine(::testing::Values(3), ::testing::Values("mixed")),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "ranks_mixed");
                         });

class Suites : public ::testing::TestWithParam<std::tuple<std::string, std::string, int>> {};

TEST_P(Suites, Pass) {
  const auto& [suite, layout, ranks] = GetParam();
  ExpectSuccess(RunJob(ranks, suite, MakeLayout(layout)));
}

INSTANTIATE_TEST_SUITE_P(
    All, Suites,
    ::testing::Combine(::testing::Values("async", "p2p", "split", "unique_id", "bad_input"),
                       ::testing::Values("shm", "tcp"), ::testing::Values(2, 4)),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param), "_",
                          std::get<2>(info.param), "ranks");
    });

class Failures : public ::testing::TestWithParam<std::string> {};

TEST_P(Failures, MismatchedCountFailsEveryRankWithoutHanging) {
  // The timeout is short so that even a transport that cannot see the mismatch ends quickly.
  ProcessResult result = RunJob(3, "mismatch", MakeLayout(GetParam()), {{"WEFT_TIMEOUT", "5"}}, 60);
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "all_reduce")) << result.output;
}

TEST_P(Failures, MismatchedVariableCountsFailWithoutHanging) {
  ProcessResult result =
      RunJob(3, "mismatch_v", MakeLayout(GetParam()), {{"WEFT_TIMEOUT", "5"}}, 60);
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const auto reported = [&](absl::string_view name) {
    for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
      if (absl::StrContains(line, "expected error: ") && absl::StrContains(line, name)) return true;
    }
    return false;
  };
  for (const char* name : {"all_gather_v", "reduce_scatter_v", "all_to_all_v"}) {
    EXPECT_TRUE(reported(name)) << name << " failed nowhere:\n" << result.output;
  }
  EXPECT_TRUE(absl::StrContains(result.output, "mismatched operation")) << result.output;
}

TEST_P(Failures, AbortEndsABlockedOperationPromptly) {
  ProcessResult result = RunJob(2, "abort", MakeLayout(GetParam()));
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "aborted")) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Transports, Failures, ::testing::Values("shm", "tcp"));

TEST(Launchers, TorchrunStyleVariables) {
  // Two ranks started by hand with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, as torchrun does.
  const std::string script = absl::StrCat(
      "export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 12768)) WORLD_SIZE=2 "
      "WEFT_TOKEN=test-token-123; "
      "RANK=0 LOCAL_RANK=0 ",
      WEFT_WORKER,
      " async & a=$!; "
      "RANK=1 LOCAL_RANK=1 ",
      WEFT_WORKER,
      " async & b=$!; "
      "wait $a; ra=$?; wait $b; rb=$?; exit $((ra + rb))");
  ProcessResult result =
      RunProcess({"/bin/sh", "-c", script}, {}, Scaled(std::chrono::seconds(60)));
  ExpectSuccess(result);
}

TEST(Launchers, OpenMpiMpirun) {
  ProcessResult probe =
      RunProcess({"/bin/sh", "-c", "command -v mpirun"}, {}, Scaled(std::chrono::seconds(10)));
  if (probe.exit_code != 0) GTEST_SKIP() << "mpirun is not installed";
  ProcessResult result =
      RunProcess({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
                  "WEFT_TOKEN", WEFT_WORKER, "async"},
                 {{"WEFT_TOKEN", "mpirun-test-token"}, {"OMPI_MCA_plm_rsh_agent", ""}},
                 Scaled(std::chrono::seconds(60)));
  ExpectSuccess(result);
}

}  // namespace
}  // namespace weft::testing
