// Topology: what one host looks like to a communication library — its processor packages, NUMA
// nodes, cores and caches, the PCI devices that matter for placement (GPUs, NICs), and its
// network interfaces with their link speeds.
//
// The model is plain data: discovery (discover.h) fills it from hwloc and sysfs, the text format
// (topology_text.h) stores and reloads it, so a description written on one machine with
// `weft-info --dump` can stand in for detection (WEFT_TOPO_FILE) where hwloc sees too little
// (containers, simulated nodes) or to reproduce another machine's decisions.
//
// CPU numbers are the kernel's logical CPU numbers (hwloc's "PU os_index"); NUMA node numbers are
// the kernel's node numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/topology/cpu_list.h"

namespace weft::topology {

struct NumaNode {
  int os_index = 0;
  int package = -1;           // index into Topology::packages order, -1 when unknown
  uint64_t memory_bytes = 0;  // local memory, 0 when unknown
  CpuList cpus;
  bool operator==(const NumaNode&) const = default;
};

struct Core {
  int package = -1;  // as NumaNode::package
  int numa = -1;     // os_index of the NUMA node holding the core, -1 when unknown
  CpuList cpus;      // its hardware threads
  bool operator==(const Core&) const = default;
};

// A data or unified cache, one entry per cache instance.
struct Cache {
  int level = 1;
  uint64_t bytes = 0;
  CpuList cpus;  // the CPUs that share it
  bool operator==(const Cache&) const = default;
};

enum class PciKind : uint8_t { kGpu, kNic, kOther };

struct PciDevice {
  std::string bus_id;  // "0000:3b:00.0"
  PciKind kind = PciKind::kOther;
  uint16_t class_id = 0;  // PCI class and subclass, e.g. 0x0200 Ethernet, 0x0302 3D controller
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  float link_gbps = 0;  // the PCIe link's bandwidth in GB/s as hwloc reports it, 0 when unknown
  CpuList cpus;         // the CPUs close to the device (its NUMA node or package)
  std::vector<std::string> os_devices;  // "eth0", "mlx5_0", "cuda0": names the OS gives it
  bool operator==(const PciDevice&) const = default;
};

struct NetInterface {
  std::string name;         // "eth0"
  std::string pci_bus_id;   // the device behind it; "" for virtual interfaces (lo, veth, bridges)
  int64_t speed_mbps = -1;  // the link speed the driver reports, -1 when it reports none
  bool up = false;
  bool loopback = false;
  std::vector<std::string> ipv4;  // "10.1.0.2/24"
  CpuList cpus;                   // CPUs close to its device; empty for virtual interfaces
  bool operator==(const NetInterface&) const = default;
};

struct Topology {
  std::string hostname;
  std::string source;  // how it was obtained: "hwloc 2.9.0", "sysfs", "file /path"
  int packages = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;
  std::vector<Cache> caches;
  std::vector<PciDevice> pci_devices;
  std::vector<NetInterface> interfaces;

  // Every CPU of the host's cores.
  CpuList AllCpus() const;
  // The NUMA node containing `cpu`, or nullptr.
  const NumaNode* NumaOf(int cpu) const;
  // The interface called `name`, or nullptr.
  const NetInterface* Interface(const std::string& name) const;
  // GPUs, in bus order.
  std::vector<const PciDevice*> Gpus() const;

  // `source` says how a topology was made, not what it is: equality ignores it.
  bool operator==(const Topology& other) const;
};

const char* Name(PciKind kind);  // "gpu", "nic", "other"

}  // namespace weft::topology
