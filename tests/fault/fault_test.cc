// Never hang, always explain: real ranks are killed, starved, mismatched and aborted, and every
// surviving rank must report what happened, naming the rank at fault, within a bound.
#include <dirent.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dump.h"
#include "gtest/gtest.h"
#include "rank_job.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"
#include "weft/comm/json.h"
#include "weft/topology/host.h"

namespace weft::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Env TransportEnv(const std::string& transport) {
  if (transport == "tcp") return {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_SOCKET_IFNAME", "lo"}};
  return {{"WEFT_TRANSPORT", "auto"}};
}

std::string NewId() {
  absl::StatusOr<std::string> id = Communicator::CreateUniqueId("127.0.0.1");
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

std::string Describe(const JobOutcome& job) {
  std::string text;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    absl::StrAppend(&text, "--- rank ", r, " (pid ", job.ranks[r].pid, ", exit ",
                    job.ranks[r].exit_code, ", signal ", job.ranks[r].signal, ")\n",
                    job.ranks[r].output);
  }
  return text;
}

// WEFT_TEST_VERBOSE=1 prints every rank's output, to read the messages users would see.
void ShowIfVerbose(const JobOutcome& job) {
  if (std::getenv("WEFT_TEST_VERBOSE") != nullptr) std::printf("%s", Describe(job).c_str());
}

class DeadPeer : public ::testing::TestWithParam<std::string> {};

// kill -9 of one rank in the middle of a large all-reduce: every survivor returns an error that
// names the killed rank, its pid and host, the operation and its sequence number, within 5 s.
TEST_P(DeadPeer, EverySurvivorNamesTheKilledRankWithinFiveSeconds) {
  constexpr int kSize = 4;
  constexpr int kVictim = kSize - 1;
  Env env = TransportEnv(GetParam());
  env.emplace_back("WEFT_TIMEOUT", "60");  // far beyond the bound: the deadline must not be it
  const TempDir dir;
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dir.path());
  const JobOutcome job =
      RunRanks(FAULT_WORKER, "kill", kSize, {NewId()}, env, absl::Seconds(40 * TimeScale()));
  ShowIfVerbose(job);
  ASSERT_FALSE(job.timed_out) << Describe(job);
  const RankOutcome& victim = job.ranks[kVictim];
  ASSERT_EQ(victim.signal, SIGKILL) << Describe(job);
  const std::string pid = absl::StrCat("pid ", victim.pid);
  for (int r = 0; r < kVictim; ++r) {
    const RankOutcome& rank = job.ranks[r];
    EXPECT_EQ(rank.exit_code, 0) << "rank " << r << "\n" << Describe(job);
    EXPECT_LT(rank.ended - victim.ended, absl::Seconds(5 * TimeScale()))
        << "rank " << r << " took " << (rank.ended - victim.ended) << "\n"
        << Describe(job);
    EXPECT_TRUE(absl::StrContains(rank.output, "ERROR")) << Describe(job);
    EXPECT_TRUE(absl::StrContains(rank.output, absl::StrCat("rank ", kVictim))) << Describe(job);
    EXPECT_TRUE(absl::StrContains(rank.output, pid)) << Describe(job);
    EXPECT_TRUE(absl::StrContains(rank.output, absl::StrCat("host ", HostName()))) << Describe(job);
    EXPECT_TRUE(absl::StrContains(rank.output, "all_reduce #")) << Describe(job);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, DeadPeer, ::testing::Values("shm", "tcp"));

// How long after its issue a rank's operation failed, as fault_worker reports it; the most an
// int64_t holds where it did not report, which no bound accepts.
int64_t FailedAfterMs(const std::string& output) {
  const std::string kTag = "FAILED_AFTER_MS ";
  const size_t at = output.find(kTag);
  if (at == std::string::npos) return std::numeric_limits<int64_t>::max();
  const size_t from = at + kTag.size();
  int64_t ms;
  if (!absl::SimpleAtoi(output.substr(from, output.find('\n', from) - from), &ms)) {
    return std::numeric_limits<int64_t>::max();
  }
  return ms;
}

class Mismatch : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs `scenario` on 4 ranks, the last of which calls another collective than the others:
  // every rank must fail with an error that contains `what_each_called`, within 10 s of issuing
  // its operation: well before the 30 s deadline (reported, not timed out). The communicator's
  // creation is not counted: 4 ranks on 2 cores beside the rest of the suite start slowly.
  void ExpectEveryRankReports(const std::string& scenario, const std::string& what_each_called) {
    constexpr int kSize = 4;
    Env env = TransportEnv(GetParam());
    env.emplace_back("WEFT_TIMEOUT", std::to_string(30 * TimeScale()));
    const TempDir dir;
    env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dir.path());
    const JobOutcome job =
        RunRanks(FAULT_WORKER, scenario, kSize, {NewId()}, env, absl::Seconds(30 * TimeScale()));
    ShowIfVerbose(job);
    ASSERT_FALSE(job.timed_out) << Describe(job);
    for (int r = 0; r < kSize; ++r) {
      EXPECT_EQ(job.ranks[r].exit_code, 0) << Describe(job);
      EXPECT_TRUE(absl::StrContains(job.ranks[r].output, what_each_called)) << Describe(job);
      EXPECT_LT(FailedAfterMs(job.ranks[r].output), 10000 * TimeScale()) << Describe(job);
    }
  }
};

// The last rank calls all_gather where the others call all_reduce: every rank fails, and its
// error shows what every rank called.
TEST_P(Mismatch, EveryRankReportsTheDifference) {
  ExpectEveryRankReports("mismatch",
                         "rank 3 called all_gather(count=1024, float) as op #0, "
                         "ranks 0-2 called all_reduce(count=4096, float, sum)");
}

// The same for operations of a few bytes, which the submitting thread may run itself.
TEST_P(Mismatch, TinyOperationsReportTheDifferenceToo) {
  ExpectEveryRankReports("mismatch_tiny",
                         "rank 3 called broadcast(count=1, float, root=0) as op #0, "
                         "ranks 0-2 called all_reduce(count=1, float, sum)");
}

INSTANTIATE_TEST_SUITE_P(Transports, Mismatch, ::testing::Values("shm", "tcp"));

class AbortFromAnotherThread : public ::testing::TestWithParam<std::string> {};

TEST_P(AbortFromAnotherThread, ReturnsWithinOneSecondAndANewCommunicatorWorks) {
  constexpr int kSize = 2;
  const JobOutcome job = RunRanks(FAULT_WORKER, "abort", kSize, {NewId(), NewId()},
                                  TransportEnv(GetParam()), absl::Seconds(30 * TimeScale()));
  ShowIfVerbose(job);
  ASSERT_FALSE(job.timed_out) << Describe(job);
  for (int r = 0; r < kSize; ++r) {
    EXPECT_EQ(job.ranks[r].exit_code, 0) << Describe(job);
    EXPECT_TRUE(absl::StrContains(job.ranks[r].output, "SECOND_COMMUNICATOR_OK")) << Describe(job);
  }
  const std::string& out = job.ranks[0].output;
  const size_t at = out.find("ABORT_RETURNED_MS ");
  ASSERT_NE(at, std::string::npos) << Describe(job);
  EXPECT_LT(std::atoi(out.c_str() + at + 18), 1000 * TimeScale()) << Describe(job);
  EXPECT_TRUE(absl::StrContains(out, "aborted")) << Describe(job);
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortFromAnotherThread, ::testing::Values("shm", "tcp"));

// SIGUSR1 makes every rank write its recorder (a busy or stuck job can be inspected without
// waiting for a timeout), and DumpFlightRecorder does the same on request.
TEST(FlightRecorder, DumpsOnSigusr1AndOnRequest) {
  constexpr int kSize = 2;
  const TempDir dir;
  Env env = TransportEnv("shm");
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dir.path());
  const JobOutcome job =
      RunRanks(FAULT_WORKER, "signal", kSize, {NewId()}, env, absl::Seconds(30 * TimeScale()));
  ShowIfVerbose(job);
  ASSERT_FALSE(job.timed_out) << Describe(job);
  for (int r = 0; r < kSize; ++r) {
    EXPECT_EQ(job.ranks[r].exit_code, 0) << Describe(job);
    EXPECT_TRUE(absl::StrContains(job.ranks[r].output, "SIGNAL_DUMP_OK")) << Describe(job);
    EXPECT_TRUE(absl::StrContains(job.ranks[r].output, "API_DUMP_OK")) << Describe(job);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string RunTool(const std::string& command) {
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    pclose(pipe);
  }
  return output;
}

// Rank 2 never calls the second all-reduce (it is alive, just late); the others time out. Every
// rank dumps its flight recorder (the late one on the others' report), and weft-trace names it.
TEST(Timeout, DumpsFlightRecordersAndWeftTraceNamesTheMissingRank) {
  constexpr int kSize = 3;
  const TempDir temp;
  const std::string& dir = temp.path();
  Env env = TransportEnv("shm");
  env.emplace_back("WEFT_TIMEOUT", std::to_string(2 * TimeScale()));
  env.emplace_back("WEFT_FLIGHT_RECORDER_DIR", dir);
  const JobOutcome job =
      RunRanks(FAULT_WORKER, "timeout", kSize, {NewId()}, env, absl::Seconds(30 * TimeScale()));
  ShowIfVerbose(job);
  ASSERT_FALSE(job.timed_out) << Describe(job);
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(job.ranks[r].exit_code, 0) << Describe(job);
  for (int r = 0; r < kSize - 1; ++r) {
    EXPECT_TRUE(absl::StrContains(job.ranks[r].output, "timed out")) << Describe(job);
    EXPECT_TRUE(absl::StrContains(job.ranks[r].output, absl::StrCat(dir, "/rank", r, ".json")))
        << Describe(job);
  }
  for (int r = 0; r < kSize; ++r) {
    const std::string path = absl::StrCat(dir, "/rank", r, ".json");
    absl::StatusOr<trace::RankDump> dump = trace::ParseDump(ReadFile(path), path);
    ASSERT_TRUE(dump.ok()) << dump.status();
    EXPECT_EQ(dump->rank, r);
    EXPECT_EQ(dump->pid, job.ranks[r].pid);
  }
  const std::string chrome = absl::StrCat(dir, "/trace.chrome");
  const std::string report =
      RunTool(absl::StrCat(WEFT_TRACE, " --chrome ", chrome, " ", dir, " 2>&1"));
  EXPECT_TRUE(absl::StrContains(report, "culprit: rank 2 never reached all_reduce #1")) << report;
  EXPECT_TRUE(absl::StrContains(report, "ranks 0-1: failed in it")) << report;
  absl::StatusOr<JsonValue> trace = ParseJson(ReadFile(chrome));
  ASSERT_TRUE(trace.ok()) << trace.status();
  const JsonValue* events = trace->Find("traceEvents");
  ASSERT_NE(events, nullptr);
  EXPECT_GE(events->items.size(), 5u);  // names, and the ops of every rank
}

}  // namespace
}  // namespace weft::testing
