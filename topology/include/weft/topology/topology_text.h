// The text form of a Topology: what `weft-info --dump` writes and WEFT_TOPO_FILE reads back.
//
// One item per line, fields separated by spaces, '#' starts a comment line:
//
//   weft-topology 1
//   hostname node0
//   packages 1
//   numa 0 package 0 memory 67108864 cpus 0-7
//   core package 0 numa 0 cpus 0,4
//   cache L2 bytes 1048576 cpus 0,4
//   pci 0000:3b:00.0 kind nic class 0x0200 vendor 0x15b3 device 0x1017 link 7.87 cpus 0-7 os eth0
//   interface eth0 pci 0000:3b:00.0 speed 25000 up 1 loopback 0 ipv4 10.0.0.2/24 cpus 0-7
//
// Empty lists and absent values are written "-". Names (hosts, interfaces, devices) cannot hold
// spaces, as on Linux. Reading fails with a message naming the line and what is wrong with it,
// never with a half-read topology.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weft/topology/topology.h"

namespace weft::topology {

std::string FormatTopology(const Topology& topology);

// `origin` names where the text came from in error messages and in Topology::source.
absl::StatusOr<Topology> ParseTopology(absl::string_view text, absl::string_view origin);

// Reads and parses the file at `path`.
absl::StatusOr<Topology> ReadTopologyFile(const std::string& path);

}  // namespace weft::topology
