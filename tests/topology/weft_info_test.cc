// weft-info and WEFT_BIND as users meet them: real processes, real files, real sockets.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
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

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;
constexpr std::chrono::seconds kLimit(20);

ProcessResult Info(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<std::string> argv = {WEFT_INFO};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, env, Scaled(kLimit));
}

// A file in a fresh temporary directory, removed with the fixture.
class WeftInfo : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  std::string Path(const std::string& name) const {
    return (fs::path(dir_.path()) / name).string();
  }
  const weft::testing::TempDir dir_{"info-test"};
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The text without comment lines (which say where the topology came from).
std::string WithoutComments(const std::string& text) {
  std::string kept;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "#")) absl::StrAppend(&kept, line, "\n");
  }
  return kept;
}

TEST_F(WeftInfo, DumpedTopologyReadsBackThroughWeftTopoFile) {
  const ProcessResult dumped = Info({"--dump", Path("topo.txt")});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.output;
  const std::string first = ReadFile(Path("topo.txt"));
  EXPECT_TRUE(absl::StartsWith(first, "weft-topology 1\n")) << first;
  const ProcessResult again = Info({"--dump", "-"}, {{"WEFT_TOPO_FILE", Path("topo.txt")}});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(WithoutComments(again.output), WithoutComments(first));
}

TEST_F(WeftInfo, ReportsAGivenTopologyFile) {
  WriteFile(Path("gpu.txt"),
            "weft-topology 1\nhostname gpu-node-7\npackages 1\n"
            "numa 0 package 0 memory 1073741824 cpus 0-3\n"
            "core package 0 numa 0 cpus 0\ncore package 0 numa 0 cpus 1\n"
            "pci 0000:3b:00.0 kind gpu class 0x0302 vendor 0x10de device 0x2330 link 31.5 "
            "cpus 0-3 os cuda0\n");
  const ProcessResult r = Info({}, {{"WEFT_TOPO_FILE", Path("gpu.txt")}});
  EXPECT_TRUE(absl::StrContains(r.output, "Topology of gpu-node-7 (file ")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "PCI 0000:3b:00.0 gpu")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "Transports: shm yes, tcp yes")) << r.output;
}

TEST_F(WeftInfo, ABadTopologyFileFailsNamingTheLine) {
  WriteFile(Path("bad.txt"), "weft-topology 1\ncore package 0 numa 0\n");
  const ProcessResult r = Info({}, {{"WEFT_TOPO_FILE", Path("bad.txt")}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "line 2")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "WEFT_TOPO_FILE")) << r.output;
}

TEST_F(WeftInfo, ShowsWhereEachSettingCameFrom) {
  const ProcessResult r =
      Info({}, {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_TOKEN", "s3cret"}, {"WEFT_TIMEOUTT", "5"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("WEFT_TRANSPORT +tcp +environment")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("WEFT_SOCKET_NSTREAMS +2 +default")))
      << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "s3cret")) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("WEFT_TIMEOUTT +5 +environment; not read")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("lo up loopback\n +127.0.0.1/8: accepts")))
      << r.output;
}

TEST_F(WeftInfo, ChecksPeersByConnecting) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(at);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len), 0);
  const std::string open_port = std::to_string(ntohs(at.sin_port));
  const ProcessResult up = Info({"--peer", "127.0.0.1:" + open_port});
  EXPECT_EQ(up.exit_code, 0) << up.output;
  EXPECT_TRUE(absl::StrContains(up.output, "reachable, from 127.0.0.1:")) << up.output;
  close(fd);  // nothing listens there any more
  const ProcessResult down = Info({}, {{"WEFT_ADDR", "127.0.0.1"}, {"WEFT_PORT", open_port}});
  EXPECT_EQ(down.exit_code, 1) << down.output;
  EXPECT_TRUE(absl::StrContains(down.output, "store (WEFT_ADDR:WEFT_PORT) 127.0.0.1:"))
      << down.output;
  EXPECT_TRUE(absl::StrContains(down.output, "refused")) << down.output;
}

// Every WEFT_* name the libraries and the launcher read must be listed (and so explained) by
// weft-info.
TEST(WeftInfoVariables, ListsEveryVariableTheSourcesRead) {
  const ProcessResult listed = Info({"--list-variables"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  std::set<std::string> known;
  for (absl::string_view name : absl::StrSplit(listed.output, '\n', absl::SkipEmpty())) {
    known.emplace(name);
  }
  const std::regex literal("\"(WEFT_[A-Z0-9_]+)");
  std::set<std::string> missing;
  int files = 0;
  for (const char* dir : {"comm", "kernels", "topology", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(SOURCE_DIR) / dir)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      ++files;
      const std::string text = ReadFile(entry.path().string());
      for (std::sregex_iterator it(text.begin(), text.end(), literal), end; it != end; ++it) {
        const std::string name = (*it)[1];
        if (!known.count(name)) missing.insert(name + " (" + entry.path().string() + ")");
      }
    }
  }
  EXPECT_GT(files, 20);
  EXPECT_TRUE(missing.empty()) << "add to tools/weft-info/variables.cc: "
                               << absl::StrJoin(missing, ", ");
}

// WEFT_BIND through weftrun: each rank reports the CPUs it may run on.
TEST_F(WeftInfo, WeftrunBindsRanksOnlyWhenAskedAndNotAlreadyBound) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  // Two NUMA nodes of one CPU each, on CPUs this machine has.
  WriteFile(Path("two-nodes.txt"),
            "weft-topology 1\nhostname h\npackages 1\n"
            "numa 0 package 0 memory 0 cpus 0\nnuma 1 package 0 memory 0 cpus 1\n"
            "core package 0 numa 0 cpus 0\ncore package 0 numa 1 cpus 1\n");
  const std::vector<std::string> job = {WEFTRUN,
                                        "-n",
                                        "2",
                                        "--timeout",
                                        std::to_string(15 * TimeScale()),
                                        "--",
                                        "/bin/sh",
                                        "-c",
                                        "grep Cpus_allowed_list /proc/self/status"};
  const Env env = {{"WEFT_TOPO_FILE", Path("two-nodes.txt")}, {"WEFT_BIND", "numa"}};
  const ProcessResult bound = RunProcess(job, env, Scaled(kLimit));
  ASSERT_EQ(bound.exit_code, 0) << bound.output;
  EXPECT_TRUE(std::regex_search(bound.output, std::regex("\\[0\\] Cpus_allowed_list:\\s+0\n")))
      << bound.output;
  EXPECT_TRUE(std::regex_search(bound.output, std::regex("\\[1\\] Cpus_allowed_list:\\s+1\n")))
      << bound.output;

  std::vector<std::string> under_taskset = {"taskset", "-c", "1"};
  under_taskset.insert(under_taskset.end(), job.begin(), job.end());
  const ProcessResult kept = RunProcess(under_taskset, env, Scaled(kLimit));
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_TRUE(std::regex_search(kept.output, std::regex("\\[0\\] Cpus_allowed_list:\\s+1\n")))
      << kept.output;
  EXPECT_TRUE(absl::StrContains(kept.output, "already bound to CPUs 1")) << kept.output;

  const ProcessResult off =
      RunProcess(job, {{"WEFT_TOPO_FILE", Path("two-nodes.txt")}}, Scaled(kLimit));
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(absl::StrContains(off.output, "WEFT_BIND")) << off.output;
  EXPECT_TRUE(std::regex_search(off.output, std::regex("\\[1\\] Cpus_allowed_list:\\s+0-1\n")))
      << off.output;
}

}  // namespace
}  // namespace weft::testing
