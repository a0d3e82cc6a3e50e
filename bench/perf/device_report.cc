#include "perf/device_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "weft/topology/host.h"

namespace weft::perf {
namespace {

// Fixed-size so one all-gather of bytes carries every rank's record.
struct Record {
  int32_t pid;
  char hostname[128];
  char identity[256];
  char device[128];
};

void CopyField(const std::string& value, char* field, size_t size) {
  std::memset(field, 0, size);
  std::memcpy(field, value.data(), std::min(value.size(), size - 1));
}

// The first "model name" of /proc/cpuinfo (x86); else the machine type, e.g. "aarch64".
std::string ProcessorModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      return std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
    }
  }
  utsname name;
  if (uname(&name) == 0) return name.machine;
  return "cpu";
}

}  // namespace

absl::StatusOr<std::vector<RankInfo>> GatherRankInfo(Communicator& comm) {
  Record mine{};
  mine.pid = static_cast<int32_t>(getpid());
  std::string hostname = HostName();
  hostname = hostname.substr(0, hostname.find('.'));
  CopyField(hostname, mine.hostname, sizeof(mine.hostname));
  CopyField(HostIdentity(), mine.identity, sizeof(mine.identity));
  CopyField(ProcessorModel(), mine.device, sizeof(mine.device));

  std::vector<Record> all(comm.size());
  if (absl::Status s = comm.AllGather(&mine, all.data(), sizeof(Record), DataType::kUint8).Wait();
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("gathering the ranks' identities: ", s.message()));
  }
  std::vector<RankInfo> infos;
  for (int r = 0; r < comm.size(); ++r) {
    RankInfo info;
    info.rank = r;
    info.pid = all[r].pid;
    info.hostname = all[r].hostname;
    info.device = all[r].device;
    for (int lower = 0; lower < r; ++lower) {
      if (std::strcmp(all[lower].identity, all[r].identity) == 0) ++info.local_rank;
    }
    infos.push_back(std::move(info));
  }
  return infos;
}

std::string DeviceLine(const RankInfo& info) {
  return absl::StrFormat("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] %s\n", info.rank,
                         0, info.pid, info.hostname, info.local_rank, info.device);
}

}  // namespace weft::perf
