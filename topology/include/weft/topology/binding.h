// Core binding: pinning a rank to the cores close to the device it talks through.
//
// A rank that drives a NIC or a GPU from the other socket pays for every byte twice over the
// inter-socket link, and a rank the scheduler moves between cores loses its caches. Binding it to
// the cores next to its device helps both — but only a launcher that knows the whole node's plan
// should bind, and if one already did (Slurm, mpirun --bind-to, taskset), its choice stands. So
// binding is opt-in (WEFT_BIND) and is never done when the current affinity is already narrower
// than the host's CPUs.
//
// WEFT_BIND:
//   off   (default) never bind
//   auto  near the GPU of this local rank when the host has GPUs, else near the NIC, else on the
//         rank's share of the NUMA nodes; nothing when there is nothing to gain (one NUMA node
//         and no device locality)
//   gpu   near GPU (local rank mod GPU count)
//   nic   near the NIC named by WEFT_SOCKET_IFNAME (its first plain name), or the first one that
//         is up, has an address and reports its locality
//   numa  on NUMA node (local rank × nodes / local size): the ranks split the nodes in blocks
// The ranks that share a device (or a NUMA node) split its cores between them in blocks of whole
// cores; with fewer cores than ranks they share all of them.
#pragma once

#include <sched.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weft/topology/topology.h"

namespace weft::topology {

enum class BindPolicy { kOff, kAuto, kGpu, kNic, kNuma };

// Parses a WEFT_BIND value ("" is kOff). Fails naming the accepted values.
absl::StatusOr<BindPolicy> ParseBindPolicy(absl::string_view text);
const char* Name(BindPolicy policy);

struct BindRequest {
  BindPolicy policy = BindPolicy::kOff;
  int local_rank = 0;
  int local_size = 1;
  std::string nic;  // the interface to bind near for kNic/kAuto; "" picks one
};

struct BindPlan {
  bool bind = false;
  CpuList cpus;        // when bind
  std::string reason;  // why these CPUs, or why no binding: for weft-info and WEFT_DEBUG=INFO
};

// Decides where local rank `request.local_rank` should run, given the affinity the process has
// now (`current`, see CurrentAffinity()).
BindPlan PlanBinding(const Topology& topology, const CpuList& current, const BindRequest& request);

// The CPUs this process may run on now (sched_getaffinity).
absl::StatusOr<CpuList> CurrentAffinity();

// `cpus` as a cpu_set_t for sched_setaffinity(), prepared in advance (e.g. before fork(), where
// the child may only make system calls). CPUs above CPU_SETSIZE are left out.
cpu_set_t ToCpuSet(const CpuList& cpus);

// The NIC to bind near: the first plain name in a WEFT_SOCKET_IFNAME value ("" for exclusion
// lists, which name no interface to use).
std::string NicFromIfname(absl::string_view ifname_spec);

}  // namespace weft::topology
