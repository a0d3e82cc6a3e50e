#include "node_binding.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "weft/topology/binding.h"
#include "weft/topology/discover.h"

namespace weft::launcher {

absl::StatusOr<NodeBinding> PlanNodeBinding(int local_size, int first_rank) {
  NodeBinding binding;
  const char* bind = std::getenv("WEFT_BIND");
  absl::StatusOr<topology::BindPolicy> policy =
      topology::ParseBindPolicy(bind == nullptr ? "" : bind);
  if (!policy.ok()) return policy.status();
  if (*policy == topology::BindPolicy::kOff) return binding;

  absl::StatusOr<topology::Topology> host = topology::LoadTopology();
  if (!host.ok()) {
    return absl::Status(host.status().code(), absl::StrCat("WEFT_BIND=", topology::Name(*policy),
                                                           ": ", host.status().message()));
  }
  absl::StatusOr<topology::CpuList> current = topology::CurrentAffinity();
  if (!current.ok()) return current.status();
  const char* ifname = std::getenv("WEFT_SOCKET_IFNAME");
  topology::BindRequest request;
  request.policy = *policy;
  request.local_size = local_size;
  request.nic = topology::NicFromIfname(ifname == nullptr ? "" : ifname);
  binding.affinity.resize(local_size);
  for (int local = 0; local < local_size; ++local) {
    request.local_rank = local;
    const topology::BindPlan plan = topology::PlanBinding(*host, *current, request);
    if (plan.bind) binding.affinity[local] = topology::ToCpuSet(plan.cpus);
    binding.notes.push_back(absl::StrCat("rank ", first_rank + local,
                                         ": WEFT_BIND=", topology::Name(*policy), ": ",
                                         plan.bind ? "bound " : "not bound: ", plan.reason));
  }
  return binding;
}

}  // namespace weft::launcher
