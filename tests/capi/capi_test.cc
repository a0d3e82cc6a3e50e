// The C API, in real processes under weftrun: each case runs one capi_worker suite (C99, linked
// against libweft.so) over a rank count and a transport, or the C++ store rendezvous worker.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "time_scale.h"

namespace weft::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

ProcessResult RunJob(int ranks, const std::vector<std::string>& program, Env env = {}) {
  const int limit_s = 120 * TimeScale();
  std::vector<std::string> argv = {
      WEFTRUN, "-n", std::to_string(ranks), "--timeout", std::to_string(limit_s), "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  env.emplace_back("WEFT_TIMEOUT", std::to_string(60 * TimeScale()));
  // Jobs that fail on purpose dump their flight recorders: here, not in /tmp for good.
  const TempDir dumps("capi-test");
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dumps.path());
  return RunProcess(argv, env, std::chrono::seconds(limit_s + 10));
}

Env Transport(const std::string& name) {
  if (name == "tcp") return {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_SOCKET_IFNAME", "lo"}};
  return {{"WEFT_TRANSPORT", "auto"}};
}

void ExpectPassed(const ProcessResult& result, int ranks, const std::string& suite) {
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(absl::StrContains(result.output,
                                  absl::StrCat("rank ", r, ": suite ", suite, ": 0 failures")))
        << "rank " << r << " did not finish\n"
        << result.output;
  }
}

class Suites : public ::testing::TestWithParam<std::tuple<std::string, std::string, int>> {};

TEST_P(Suites, Pass) {
  const auto& [suite, transport, ranks] = GetParam();
  ExpectPassed(RunJob(ranks, {CAPI_WORKER, suite}, Transport(transport)), ranks, suite);
}

std::string CaseName(const ::testing::TestParamInfo<Suites::ParamType>& info) {
  return absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param), "_",
                      std::get<2>(info.param), "ranks");
}

INSTANTIATE_TEST_SUITE_P(Operations, Suites,
                         ::testing::Combine(::testing::Values("collectives", "types", "vcoll",
                                                              "p2p_groups", "split_ids", "requests",
                                                              "callbacks"),
                                            ::testing::Values("shm", "tcp"),
                                            ::testing::Values(2, 3)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Errors, Suites,
                         ::testing::Combine(::testing::Values("argument_errors", "creation_errors",
                                                              "abort"),
                                            ::testing::Values("shm"), ::testing::Values(2)),
                         CaseName);

class PeerDies : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// The dead rank prints no summary line; every other rank must.
TEST_P(PeerDies, AsyncErrorNamesRankOperationAndSequence) {
  const auto& [transport, ranks] = GetParam();
  const ProcessResult result = RunJob(ranks, {CAPI_WORKER, "peer_dies"}, Transport(transport));
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < ranks; ++r) {
    if (r == 1) continue;
    EXPECT_TRUE(
        absl::StrContains(result.output, absl::StrCat("rank ", r, ": suite peer_dies: 0 failures")))
        << result.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerDies,
                         ::testing::Combine(::testing::Values("shm", "tcp"),
                                            ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "_",
                                               std::get<1>(info.param), "ranks");
                         });

TEST(StoreRendezvous, CxxThroughTheSharedLibrary) {
  for (int ranks : {2, 3}) {
    const TempDir store("capi-store");
    const ProcessResult result = RunJob(ranks, {STORE_WORKER, store.path()});
    EXPECT_FALSE(result.timed_out) << result.output;
    EXPECT_EQ(result.exit_code, 0) << result.output;
    for (int r = 0; r < ranks; ++r) {
      EXPECT_TRUE(absl::StrContains(
          result.output, absl::StrCat("rank ", r, ": store rendezvous through libweft.so: 0")))
          << result.output;
    }
  }
}

}  // namespace
}  // namespace weft::testing
