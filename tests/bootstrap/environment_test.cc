// Reading each launcher's variables, the derived rendezvous defaults, and refusals of bad values.
#include "bootstrap/environment.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

constexpr const char* kLauncherVariables[] = {"WEFT_RANK",
                                              "WEFT_SIZE",
                                              "WEFT_LOCAL_RANK",
                                              "WEFT_LOCAL_SIZE",
                                              "WEFT_ADDR",
                                              "WEFT_PORT",
                                              "WEFT_TOKEN",
                                              "RANK",
                                              "WORLD_SIZE",
                                              "LOCAL_RANK",
                                              "LOCAL_WORLD_SIZE",
                                              "MASTER_ADDR",
                                              "MASTER_PORT",
                                              "TORCHELASTIC_RUN_ID",
                                              "OMPI_COMM_WORLD_RANK",
                                              "OMPI_COMM_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_LOCAL_RANK",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE",
                                              "OMPI_MCA_ess_base_jobid",
                                              "PMI_RANK",
                                              "PMI_SIZE",
                                              "MPI_LOCALRANKID",
                                              "MPI_LOCALNRANKS",
                                              "PMI_LOCAL_RANK",
                                              "PMI_LOCAL_SIZE",
                                              "PMI_JOBID",
                                              "PMI_KVSNAME",
                                              "PALS_APID",
                                              "SLURM_PROCID",
                                              "SLURM_NTASKS",
                                              "SLURM_LOCALID",
                                              "SLURM_NODEID",
                                              "SLURM_TASKS_PER_NODE",
                                              "SLURM_JOB_ID",
                                              "SLURM_JOBID",
                                              "SLURM_STEP_ID",
                                              "SLURM_STEPID"};

class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }

  static void Clear() {
    for (const char* name : kLauncherVariables) unsetenv(name);
  }
  static void Set(const char* name, const char* value) { setenv(name, value, 1); }

  static LaunchEnvironment ReadOk() {
    absl::StatusOr<LaunchEnvironment> env = ReadLaunchEnvironment();
    EXPECT_TRUE(env.ok()) << env.status();
    return env.ok() ? *env : LaunchEnvironment{};
  }

  // The error, which must name `variable`.
  static absl::Status ReadErrorNaming(absl::string_view variable) {
    absl::StatusOr<LaunchEnvironment> env = ReadLaunchEnvironment();
    EXPECT_FALSE(env.ok());
    EXPECT_TRUE(absl::StrContains(env.status().message(), variable)) << env.status();
    return env.status();
  }
  static void ReadError(absl::string_view variable) { (void)ReadErrorNaming(variable); }
};

// Derived ports lie below Linux's ephemeral range, where no connection or port-0 listener sits.
void ExpectDerivedPort(int port) {
  EXPECT_GE(port, 20000);
  EXPECT_LT(port, 32768);
}

bool IsHex(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isxdigit);
}

TEST_F(EnvironmentTest, NothingSetListsTheVariablesLookedFor) {
  absl::Status status = ReadLaunchEnvironment().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  for (const char* name :
       {"WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    EXPECT_TRUE(absl::StrContains(status.message(), name)) << status;
  }
}

TEST_F(EnvironmentTest, Weftrun) {
  Set("WEFT_RANK", "2");
  Set("WEFT_SIZE", "4");
  Set("WEFT_LOCAL_RANK", "0");
  Set("WEFT_LOCAL_SIZE", "2");
  Set("WEFT_ADDR", "10.1.2.3");
  Set("WEFT_PORT", "29400");
  Set("WEFT_TOKEN", "secret");
  // A torchrun-style variable set as well loses to weftrun's own.
  Set("RANK", "3");
  Set("WORLD_SIZE", "4");
  const LaunchEnvironment env = ReadOk();
  EXPECT_EQ(env.source, "weftrun");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.size, 4);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_size, 2);
  EXPECT_EQ(env.store_host, "10.1.2.3");
  EXPECT_EQ(env.store_port, 29400);
  EXPECT_EQ(env.token, "secret");
}

TEST_F(EnvironmentTest, TorchrunWithMasterAddressAndDerivedToken) {
  Set("RANK", "5");
  Set("WORLD_SIZE", "8");
  Set("LOCAL_RANK", "1");
  Set("LOCAL_WORLD_SIZE", "4");
  Set("MASTER_ADDR", "node07");
  Set("MASTER_PORT", "29500");
  Set("TORCHELASTIC_RUN_ID", "job-a");
  const LaunchEnvironment a = ReadOk();
  EXPECT_EQ(a.source, "torchrun");
  EXPECT_EQ(a.rank, 5);
  EXPECT_EQ(a.size, 8);
  EXPECT_EQ(a.local_rank, 1);
  EXPECT_EQ(a.local_size, 4);
  EXPECT_EQ(a.store_host, "node07");
  EXPECT_EQ(a.store_port, 29500);
  EXPECT_EQ(a.token.size(), 32u);
  EXPECT_TRUE(IsHex(a.token)) << a.token;
  EXPECT_EQ(ReadOk().token, a.token);  // every rank derives the same

  Set("TORCHELASTIC_RUN_ID", "job-b");
  EXPECT_NE(ReadOk().token, a.token);

  // WEFT_ADDR / WEFT_PORT / WEFT_TOKEN override what torchrun says.
  Set("WEFT_ADDR", "10.0.0.9");
  Set("WEFT_PORT", "31000");
  Set("WEFT_TOKEN", "mine");
  const LaunchEnvironment b = ReadOk();
  EXPECT_EQ(b.store_host, "10.0.0.9");
  EXPECT_EQ(b.store_port, 31000);
  EXPECT_EQ(b.token, "mine");
}

TEST_F(EnvironmentTest, MpirunOnOneHostDerivesLoopbackAndPortFromTheJobId) {
  Set("OMPI_COMM_WORLD_RANK", "1");
  Set("OMPI_COMM_WORLD_SIZE", "4");
  Set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  Set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  Set("OMPI_MCA_ess_base_jobid", "3735552001");
  const LaunchEnvironment a = ReadOk();
  EXPECT_EQ(a.source, "mpirun");
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.size, 4);
  EXPECT_EQ(a.store_host, "127.0.0.1");
  ExpectDerivedPort(a.store_port);
  EXPECT_TRUE(absl::StrContains(a.job_id, "3735552001")) << a.job_id;
  EXPECT_EQ(a.token.size(), 32u);
  EXPECT_EQ(ReadOk().store_port, a.store_port);

  Set("OMPI_MCA_ess_base_jobid", "3735552002");
  const LaunchEnvironment b = ReadOk();
  ExpectDerivedPort(b.store_port);
  EXPECT_NE(b.token, a.token);
}

// A derived port inside the ephemeral range failed a CI run: another test's connection held it.
TEST_F(EnvironmentTest, DerivedPortsSpreadBelowTheEphemeralRange) {
  Set("OMPI_COMM_WORLD_RANK", "0");
  Set("OMPI_COMM_WORLD_SIZE", "2");
  int lowest = 65536;
  int highest = 0;
  for (int job = 0; job < 2000; ++job) {
    Set("OMPI_MCA_ess_base_jobid", std::to_string(3735552000 + job).c_str());
    const int port = ReadOk().store_port;
    ExpectDerivedPort(port);
    lowest = std::min(lowest, port);
    highest = std::max(highest, port);
  }
  // Spread over the range, so that concurrent jobs rarely meet.
  EXPECT_LT(lowest, 20100);
  EXPECT_GT(highest, 32667);
}

TEST_F(EnvironmentTest, PmiWithAndWithoutLocalVariables) {
  Set("PMI_RANK", "3");
  Set("PMI_SIZE", "6");
  Set("PMI_JOBID", "77.0");
  LaunchEnvironment env = ReadOk();
  EXPECT_EQ(env.source, "pmi");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.size, 6);
  EXPECT_EQ(env.local_rank, -1);
  EXPECT_EQ(env.local_size, -1);
  EXPECT_EQ(env.store_host, "");  // not known to fit one host
  ExpectDerivedPort(env.store_port);

  Set("MPI_LOCALRANKID", "0");
  Set("MPI_LOCALNRANKS", "3");
  env = ReadOk();
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_size, 3);

  Clear();
  Set("PMI_RANK", "1");
  Set("PMI_SIZE", "2");
  Set("PMI_LOCAL_RANK", "1");
  Set("PMI_LOCAL_SIZE", "2");
  env = ReadOk();
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_size, 2);
  EXPECT_EQ(env.store_host, "127.0.0.1");
  EXPECT_EQ(env.store_port, 0);  // no job id: nothing to derive from
  EXPECT_EQ(env.token, "");
}

TEST_F(EnvironmentTest, SlurmReadsTheLocalSizeFromTasksPerNode) {
  Set("SLURM_PROCID", "4");
  Set("SLURM_NTASKS", "7");
  Set("SLURM_LOCALID", "0");
  Set("SLURM_NODEID", "2");
  Set("SLURM_TASKS_PER_NODE", "2(x2),1(x1),2");
  Set("SLURM_JOB_ID", "123456");
  Set("SLURM_STEP_ID", "3");
  const LaunchEnvironment env = ReadOk();
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 4);
  EXPECT_EQ(env.size, 7);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_size, 1);
  EXPECT_EQ(env.store_host, "");  // several hosts, no address named
  EXPECT_EQ(env.job_id, "slurm:123456.3");
  ExpectDerivedPort(env.store_port);

  Set("SLURM_NODEID", "3");
  EXPECT_EQ(ReadOk().local_size, 2);
  Set("SLURM_NODEID", "4");
  ReadError("SLURM_NODEID");
  Set("SLURM_NODEID", "0");
  Set("SLURM_TASKS_PER_NODE", "2(3)");
  ReadError("SLURM_TASKS_PER_NODE");
}

TEST_F(EnvironmentTest, RefusesBadNumbers) {
  Set("WORLD_SIZE", "4");
  for (const char* bad : {"abc", "", "-1", "+1", " 1", "1 ", "0x1", "99999999999"}) {
    Set("RANK", bad);
    EXPECT_EQ(ReadErrorNaming("RANK").code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  Set("RANK", "4");
  ReadError("WORLD_SIZE");  // rank not below size
  Set("RANK", "0");
  Set("WORLD_SIZE", "0");
  ReadError("WORLD_SIZE");
  unsetenv("WORLD_SIZE");
  ReadError("WORLD_SIZE");  // rank without size
  Set("WORLD_SIZE", "4");
  Set("LOCAL_RANK", "2");
  Set("LOCAL_WORLD_SIZE", "2");
  ReadError("local rank");
  Set("LOCAL_WORLD_SIZE", "8");
  ReadError("local size");
  Set("LOCAL_WORLD_SIZE", "2");
  Set("LOCAL_RANK", "1");
  ReadOk();
}

TEST_F(EnvironmentTest, RefusesBadRendezvousValues) {
  Set("WEFT_RANK", "0");
  Set("WEFT_SIZE", "1");
  EXPECT_EQ(ReadOk().store_host, "127.0.0.1");  // a job of one fits one host
  for (const char* bad : {"0", "65536", "70000", "port", ""}) {
    Set("MASTER_PORT", bad);
    ReadError("MASTER_PORT");
  }
  unsetenv("MASTER_PORT");
  Set("WEFT_ADDR", "");
  ReadError("WEFT_ADDR");
  unsetenv("WEFT_ADDR");
  Set("WEFT_TOKEN", "");
  ReadError("WEFT_TOKEN");
}

}  // namespace
}  // namespace weft
