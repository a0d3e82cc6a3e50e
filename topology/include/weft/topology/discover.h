// Finding out what this host looks like.
//
// Processors, NUMA nodes, caches and PCI devices come from hwloc (when Weft was built with it;
// otherwise only the online CPUs are listed, one core each, in one NUMA node). Network interfaces
// come from the kernel (getifaddrs and /sys/class/net), because hwloc lists only interfaces
// backed by a PCI device, while Weft also runs over virtual ones (veth pairs, bridges, loopback),
// and because the link speed is the driver's to report (/sys/class/net/<if>/speed).
#pragma once

#include "absl/status/statusor.h"
#include "weft/topology/topology.h"

namespace weft::topology {

// Whether this build discovers with hwloc.
bool HaveHwloc();

// Detects this host's topology now. Fails only when the system cannot be read at all.
absl::StatusOr<Topology> Detect();

// This host's topology as Weft should use it: the file named by WEFT_TOPO_FILE when set (a file
// `weft-info --dump` wrote), otherwise Detect(). A bad file is an error, never silently replaced
// by detection, so that a user who asked for a file gets it or learns why not.
absl::StatusOr<Topology> LoadTopology();

// The network interfaces alone (part of Detect()).
absl::StatusOr<std::vector<NetInterface>> DetectInterfaces();

}  // namespace weft::topology
