#include "weft/topology/topology.h"

#include <algorithm>
#include <tuple>

namespace weft::topology {

CpuList Topology::AllCpus() const {
  CpuList all;
  for (const Core& core : cores) all.insert(all.end(), core.cpus.begin(), core.cpus.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

const NumaNode* Topology::NumaOf(int cpu) const {
  for (const NumaNode& node : numa_nodes) {
    if (std::binary_search(node.cpus.begin(), node.cpus.end(), cpu)) return &node;
  }
  return nullptr;
}

const NetInterface* Topology::Interface(const std::string& name) const {
  for (const NetInterface& nic : interfaces) {
    if (nic.name == name) return &nic;
  }
  return nullptr;
}

std::vector<const PciDevice*> Topology::Gpus() const {
  std::vector<const PciDevice*> gpus;
  for (const PciDevice& device : pci_devices) {
    if (device.kind == PciKind::kGpu) gpus.push_back(&device);
  }
  return gpus;
}

bool Topology::operator==(const Topology& other) const {
  auto fields = [](const Topology& t) {
    return std::tie(t.hostname, t.packages, t.numa_nodes, t.cores, t.caches, t.pci_devices,
                    t.interfaces);
  };
  return fields(*this) == fields(other);
}

const char* Name(PciKind kind) {
  switch (kind) {
    case PciKind::kGpu:
      return "gpu";
    case PciKind::kNic:
      return "nic";
    case PciKind::kOther:
      break;
  }
  return "other";
}

}  // namespace weft::topology
