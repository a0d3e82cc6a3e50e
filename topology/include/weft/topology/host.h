// Which ranks share a host: the identity that decides between shared memory and the network.
//
// Two processes are on one host when they see the same hostname and the same kernel boot id
// (containers that share a hostname across machines then still differ). WEFT_HOSTNAME replaces
// both, so tests can pretend that ranks of one machine live on several hosts.
#pragma once

#include <string>

namespace weft {

// "<hostname>/<boot id>", or WEFT_HOSTNAME verbatim when set.
std::string HostIdentity();

// The running kernel's boot id, "" when it cannot be read. Processes that see the same one run on
// one machine and share its cores, whatever host identities they carry: the network namespaces
// of tests/rig, containers with hostnames of their own, ranks given different WEFT_HOSTNAMEs.
std::string KernelIdentity();

// The bare hostname for messages (WEFT_HOSTNAME when set).
std::string HostName();

}  // namespace weft
