// The "# Using devices" lines: who every rank is, gathered to every rank so rank 0 can print them
// in rank order, as nccl-tests does over MPI.
//
//   #  Rank  0 Group  0 Pid  28307 on      gpu59 device  0 [cpu] Intel(R) Xeon(R) ...
//
// A CPU rank has no device: the device column is the rank's index among the ranks on its host
// (what nccl-tests' GPU index is under one process per GPU), the bracket says "cpu" where
// nccl-tests puts the PCI address, and the name is the processor's model.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weft/comm/communicator.h"

namespace weft::perf {

struct RankInfo {
  int rank = 0;
  int pid = 0;
  int local_rank = 0;    // index among the ranks with the same host identity
  std::string hostname;  // up to the first '.', as nccl-tests prints it
  std::string device;    // the processor's model name
};

// Collective: every rank calls it. Returns every rank's info, in rank order.
absl::StatusOr<std::vector<RankInfo>> GatherRankInfo(Communicator& comm);

// One "#  Rank ..." line, ending in '\n'.
std::string DeviceLine(const RankInfo& info);

}  // namespace weft::perf
