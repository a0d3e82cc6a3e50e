#include "weft/topology/binding.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weft::topology {
namespace {

// The cores of `topology` whose CPUs all lie in `area`, and which `current` allows.
std::vector<const Core*> CoresIn(const Topology& topology, const CpuList& area,
                                 const CpuList& current) {
  std::vector<const Core*> cores;
  for (const Core& core : topology.cores) {
    if (CpuListContains(area, core.cpus) && CpuListContains(current, core.cpus)) {
      cores.push_back(&core);
    }
  }
  return cores;
}

// What a rank binds near: the CPUs of its device, and which of the local ranks share them.
struct Target {
  CpuList area;
  int position = 0;  // among the ranks with the same area
  int sharers = 1;
  std::string what;
};

// Every local rank's area, by `area_of(local rank)`; this rank's position among equals.
template <typename AreaOf>
Target Share(const BindRequest& request, AreaOf area_of, std::string what) {
  Target target{area_of(request.local_rank), 0, 0, std::move(what)};
  for (int j = 0; j < request.local_size; ++j) {
    if (area_of(j) != target.area) continue;
    if (j < request.local_rank) ++target.position;
    ++target.sharers;
  }
  return target;
}

const NetInterface* ChooseNic(const Topology& topology, const std::string& name) {
  if (!name.empty()) {
    const NetInterface* named = topology.Interface(name);
    return named != nullptr && !named->cpus.empty() ? named : nullptr;
  }
  for (const NetInterface& nic : topology.interfaces) {
    if (nic.up && !nic.loopback && !nic.ipv4.empty() && !nic.cpus.empty()) return &nic;
  }
  return nullptr;
}

BindPlan NoBinding(std::string reason) { return BindPlan{false, {}, std::move(reason)}; }

}  // namespace

absl::StatusOr<BindPolicy> ParseBindPolicy(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty() || text == "off" || text == "none" || text == "0") return BindPolicy::kOff;
  if (text == "auto" || text == "1") return BindPolicy::kAuto;
  if (text == "gpu") return BindPolicy::kGpu;
  if (text == "nic") return BindPolicy::kNic;
  if (text == "numa") return BindPolicy::kNuma;
  return absl::InvalidArgumentError(
      absl::StrCat("WEFT_BIND='", text, "' is not one of off, auto, gpu, nic, numa"));
}

const char* Name(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::kOff:
      return "off";
    case BindPolicy::kAuto:
      return "auto";
    case BindPolicy::kGpu:
      return "gpu";
    case BindPolicy::kNic:
      return "nic";
    case BindPolicy::kNuma:
      return "numa";
  }
  return "?";
}

BindPlan PlanBinding(const Topology& topology, const CpuList& current, const BindRequest& request) {
  if (request.policy == BindPolicy::kOff) return NoBinding("WEFT_BIND is off");
  const CpuList all = topology.AllCpus();
  if (!CpuListContains(current, all)) {
    return NoBinding(absl::StrCat("already bound to CPUs ", FormatCpuList(current), " of ",
                                  FormatCpuList(all),
                                  " (by the launcher, the scheduler or taskset): leaving it"));
  }
  if (request.local_size < 1 || request.local_rank < 0 ||
      request.local_rank >= request.local_size) {
    return NoBinding(absl::StrCat("local rank ", request.local_rank, " of ", request.local_size,
                                  " is not a valid placement"));
  }

  const std::vector<const PciDevice*> gpus = topology.Gpus();
  const NetInterface* nic = ChooseNic(topology, request.nic);
  BindPolicy policy = request.policy;
  if (policy == BindPolicy::kAuto) {
    if (!gpus.empty()) {
      policy = BindPolicy::kGpu;
    } else if (nic != nullptr) {
      policy = BindPolicy::kNic;
    } else if (topology.numa_nodes.size() > 1) {
      policy = BindPolicy::kNuma;
    } else {
      return NoBinding("one NUMA node and no GPU or NIC locality: binding would gain nothing");
    }
  }

  Target target;
  switch (policy) {
    case BindPolicy::kGpu: {
      if (gpus.empty()) return NoBinding("WEFT_BIND=gpu but this host has no GPU");
      auto area = [&](int j) { return gpus[j % gpus.size()]->cpus; };
      const PciDevice& gpu = *gpus[request.local_rank % gpus.size()];
      target = Share(request, area, absl::StrCat("GPU ", gpu.bus_id));
      break;
    }
    case BindPolicy::kNic: {
      if (nic == nullptr) {
        return NoBinding(
            request.nic.empty()
                ? "no network interface reports which CPUs are near it"
                : absl::StrCat("interface ", request.nic, " is absent or reports no CPU locality"));
      }
      target = Share(
          request, [&](int) { return nic->cpus; }, absl::StrCat("NIC ", nic->name));
      break;
    }
    case BindPolicy::kNuma: {
      if (topology.numa_nodes.empty()) return NoBinding("no NUMA node is known");
      const size_t nodes = topology.numa_nodes.size();
      auto node_of = [&](int j) { return j * nodes / request.local_size; };
      auto area = [&](int j) { return topology.numa_nodes[node_of(j)].cpus; };
      target = Share(
          request, area,
          absl::StrCat("NUMA node ", topology.numa_nodes[node_of(request.local_rank)].os_index));
      break;
    }
    case BindPolicy::kOff:
    case BindPolicy::kAuto:
      return NoBinding("WEFT_BIND is off");
  }

  const std::vector<const Core*> cores = CoresIn(topology, target.area, current);
  if (cores.empty()) {
    return NoBinding(absl::StrCat(target.what, " is near CPUs ", FormatCpuList(target.area),
                                  ", none of which this process may use"));
  }
  BindPlan plan;
  plan.bind = true;
  const size_t n = cores.size();
  const size_t sharers = static_cast<size_t>(target.sharers);
  if (n < sharers) {
    for (const Core* core : cores)
      plan.cpus.insert(plan.cpus.end(), core->cpus.begin(), core->cpus.end());
  } else {
    const size_t pos = static_cast<size_t>(target.position);
    for (size_t c = pos * n / sharers; c < (pos + 1) * n / sharers; ++c) {
      plan.cpus.insert(plan.cpus.end(), cores[c]->cpus.begin(), cores[c]->cpus.end());
    }
  }
  std::sort(plan.cpus.begin(), plan.cpus.end());
  plan.reason = absl::StrCat("near ", target.what, " (CPUs ", FormatCpuList(target.area), "), ",
                             "share ", target.position + 1, " of ", target.sharers, ": CPUs ",
                             FormatCpuList(plan.cpus));
  return plan;
}

absl::StatusOr<CpuList> CurrentAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity: ", std::strerror(errno)));
  }
  CpuList cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

cpu_set_t ToCpuSet(const CpuList& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  return set;
}

std::string NicFromIfname(absl::string_view ifname_spec) {
  ifname_spec = absl::StripAsciiWhitespace(ifname_spec);
  if (absl::StartsWith(ifname_spec, "^")) return "";
  absl::ConsumePrefix(&ifname_spec, "=");
  for (absl::string_view name : absl::StrSplit(ifname_spec, ',', absl::SkipWhitespace())) {
    return std::string(absl::StripAsciiWhitespace(name));
  }
  return "";
}

}  // namespace weft::topology
