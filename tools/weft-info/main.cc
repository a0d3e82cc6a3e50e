// weft-info: what Weft sees on this host and how it is configured.
//
//   weft-info [--dump FILE|-] [--peer HOST:PORT]... [--list-variables]
//
// Without options it prints the topology (or WEFT_TOPO_FILE's), the core binding WEFT_BIND would
// give, the transports this build has, the network interfaces with their addresses and whether
// each accepts connections, the reachability of the job's store (WEFT_ADDR:WEFT_PORT) and of
// every --peer, and every WEFT_* variable with its effective value and where it came from.
// --dump writes the topology in the format WEFT_TOPO_FILE reads ("-": standard output) and
// prints nothing else. Exit status: 0, 1 when something checked is unreachable or cannot be
// read, 2 for a usage error.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/tuner.h"
#include "reachability.h"
#include "transport/tcp/interfaces.h"
#include "variables.h"
#include "weft/topology/binding.h"
#include "weft/topology/discover.h"
#include "weft/topology/host.h"
#include "weft/topology/topology_text.h"

extern char** environ;

namespace weft::info {
namespace {

constexpr absl::Duration kCheckTimeout = absl::Seconds(2);

constexpr char kUsage[] =
    "Usage: weft-info [--dump FILE|-] [--peer HOST:PORT]... [--list-variables]\n"
    "Prints the topology, binding, transports, interfaces, reachability and configuration.\n"
    "  --dump FILE       write the topology for WEFT_TOPO_FILE ('-': stdout) and exit\n"
    "  --peer HOST:PORT  also check that HOST:PORT accepts TCP connections (repeatable)\n"
    "  --list-variables  print the name of every WEFT_* variable Weft reads and exit\n";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string Bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return absl::StrFormat("%.1f GiB", bytes / 1073741824.0);
  if (bytes >= (uint64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  return absl::StrCat(bytes >> 10, " KiB");
}

std::string Plural(size_t n, const char* what) {
  return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
}

void PrintTopology(const topology::Topology& t) {
  std::printf("Topology of %s (%s): %s, %s, %s, %s\n", t.hostname.c_str(), t.source.c_str(),
              Plural(t.packages, "package").c_str(),
              Plural(t.numa_nodes.size(), "NUMA node").c_str(),
              Plural(t.cores.size(), "core").c_str(), Plural(t.AllCpus().size(), "CPU").c_str());
  for (const topology::NumaNode& n : t.numa_nodes) {
    std::printf("  NUMA node %d (package %d): %s, CPUs %s\n", n.os_index, n.package,
                Bytes(n.memory_bytes).c_str(), topology::FormatCpuList(n.cpus).c_str());
  }
  // Caches summarised per level: size, instances, CPUs sharing one.
  for (int level = 1; level <= 5; ++level) {
    size_t count = 0;
    uint64_t bytes = 0;
    size_t sharing = 0;
    for (const topology::Cache& c : t.caches) {
      if (c.level != level) continue;
      ++count;
      bytes = c.bytes;
      sharing = c.cpus.size();
    }
    if (count == 0) continue;
    std::printf("  L%d cache: %zu x %s, each shared by %s\n", level, count, Bytes(bytes).c_str(),
                Plural(sharing, "CPU").c_str());
  }
  for (const topology::PciDevice& d : t.pci_devices) {
    std::printf("  PCI %s %s (class 0x%04x, %04x:%04x)%s near CPUs %s%s%s\n", d.bus_id.c_str(),
                topology::Name(d.kind), d.class_id, d.vendor_id, d.device_id,
                d.link_gbps > 0 ? absl::StrFormat(" link %.1f GB/s,", d.link_gbps).c_str() : "",
                topology::FormatCpuList(d.cpus).c_str(), d.os_devices.empty() ? "" : ": ",
                absl::StrJoin(d.os_devices, ", ").c_str());
  }
}

void PrintBinding(const topology::Topology& t) {
  absl::StatusOr<topology::BindPolicy> policy = topology::ParseBindPolicy(Env("WEFT_BIND"));
  if (!policy.ok()) {
    std::printf("Binding: %s\n", std::string(policy.status().message()).c_str());
    return;
  }
  topology::BindRequest request;
  request.policy = *policy;
  int local_rank = 0, local_size = 1;
  if (absl::SimpleAtoi(Env("WEFT_LOCAL_RANK"), &local_rank)) request.local_rank = local_rank;
  if (absl::SimpleAtoi(Env("WEFT_LOCAL_SIZE"), &local_size)) request.local_size = local_size;
  request.nic = topology::NicFromIfname(Env("WEFT_SOCKET_IFNAME"));
  absl::StatusOr<topology::CpuList> current = topology::CurrentAffinity();
  if (!current.ok()) {
    std::printf("Binding: %s\n", std::string(current.status().message()).c_str());
    return;
  }
  const topology::BindPlan plan = PlanBinding(t, *current, request);
  std::printf("Binding (WEFT_BIND=%s, local rank %d of %d): %s; this process runs on CPUs %s\n",
              topology::Name(*policy), request.local_rank, request.local_size, plan.reason.c_str(),
              topology::FormatCpuList(*current).c_str());
}

void PrintTransports() {
  std::printf("Transports: shm yes, tcp yes, ");
#ifdef WEFT_HAVE_UCX
  std::printf("ucx yes (UCX %s; WEFT_TRANSPORT=ucx), ", WEFT_UCX_VERSION);
#else
  std::printf("ucx no (built without UCX: install libucx-dev and reconfigure), ");
#endif
#ifdef WEFT_HAVE_NCCL
  std::printf("nccl: CUDA and NCCL found at build time (no NCCL transport in this version)\n");
#else
  std::printf("nccl no (built without CUDA and NCCL)\n");
#endif
}

// Returns false when an address of an interface that is up does not accept connections.
bool PrintInterfaces(const topology::Topology& t) {
  bool all_ok = true;
  std::printf("Interfaces:\n");
  for (const topology::NetInterface& nic : t.interfaces) {
    std::string line =
        absl::StrCat("  ", nic.name, nic.up ? " up" : " down", nic.loopback ? " loopback" : "");
    if (nic.speed_mbps > 0) absl::StrAppend(&line, ", ", nic.speed_mbps, " Mb/s");
    if (!nic.pci_bus_id.empty()) absl::StrAppend(&line, ", PCI ", nic.pci_bus_id);
    if (!nic.cpus.empty())
      absl::StrAppend(&line, ", near CPUs ", topology::FormatCpuList(nic.cpus));
    std::printf("%s\n", line.c_str());
    for (const std::string& cidr : nic.ipv4) {
      const std::string ip = cidr.substr(0, cidr.find('/'));
      std::string verdict = "not checked (down)";
      if (nic.up) {
        const absl::Status s = CheckLocalAddress(ip, kCheckTimeout);
        verdict = s.ok() ? "accepts connections" : std::string(s.message());
        all_ok = all_ok && s.ok();
      }
      std::printf("    %s: %s\n", cidr.c_str(), verdict.c_str());
    }
  }
  // What the TCP transport would offer its peers, under WEFT_SOCKET_IFNAME.
  absl::StatusOr<std::vector<tcp::InterfaceAddress>> all = tcp::EnumerateInterfaces();
  if (all.ok()) {
    absl::StatusOr<std::vector<tcp::InterfaceAddress>> chosen =
        tcp::SelectInterfaces(*all, Env("WEFT_SOCKET_IFNAME"));
    std::printf("  TCP would offer: %s\n", chosen.ok()
                                               ? tcp::DescribeInterfaces(*chosen).c_str()
                                               : std::string(chosen.status().message()).c_str());
  }
  return all_ok;
}

bool PrintPeer(const std::string& what, const std::string& host, int port) {
  absl::StatusOr<std::string> from = CheckPeer(host, port, kCheckTimeout);
  std::printf("  %s %s:%d: %s\n", what.c_str(), host.c_str(), port,
              from.ok() ? absl::StrCat("reachable, from ", *from).c_str()
                        : std::string(from.status().message()).c_str());
  return from.ok();
}

void PrintConfiguration() {
  std::printf("Configuration:\n");
  for (const Setting& s : EffectiveSettings(environ)) {
    std::string value = s.value.empty() ? "(unset)" : s.value;
    if (s.name == "WEFT_TOKEN" && !s.value.empty()) value = "(set, not shown)";
    std::printf("  %-22s %-24s %s%s\n", s.name.c_str(), value.c_str(),
                s.from_environment ? "environment" : "default",
                s.variable == nullptr ? "; not read by Weft: a typo?"
                                      : absl::StrCat("; ", s.variable->meaning).c_str());
  }
}

// The tuner's model in force (WEFT_TUNING_FILE or the built-in defaults) and what it picks, with
// every candidate's prediction, for two example layouts. False where the file cannot be used,
// which fails a job's creation too.
bool PrintTuning() {
  CostModel model;
  if (const std::string path = Env("WEFT_TUNING_FILE"); !path.empty()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const absl::Status s = in ? model.Merge(text.str(), path)
                              : absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
    if (!s.ok()) {
      std::printf("Tuner model: WEFT_TUNING_FILE unusable: %s\n", std::string(s.message()).c_str());
      return false;
    }
  }
  std::printf("Tuner model: %s\n", model.source().c_str());
  const CostTuner tuner(model);
  CommLayout one_host;
  one_host.ranks = 2;
  one_host.max_local = one_host.lanes = 2;
  one_host.arena = one_host.remote_read = true;
  CommLayout two_nodes;
  two_nodes.ranks = 4;
  two_nodes.nodes = 2;
  two_nodes.max_local = two_nodes.lanes = 2;
  for (const CommLayout& layout : {one_host, two_nodes}) {
    for (OpKind kind : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kBroadcast}) {
      for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{16} << 20}) {
        std::printf("  %s\n", tuner.Explain(kind, bytes, layout).c_str());
      }
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  std::string dump;
  bool dump_requested = false;
  std::vector<std::pair<std::string, int>> peers;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list-variables") {
      for (const Variable& v : KnownVariables()) std::printf("%s\n", v.name);
      return 0;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if ((arg == "--dump" || arg == "--peer") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--dump") {
        dump = value;
        dump_requested = true;
        continue;
      }
      const size_t colon = value.rfind(':');
      int port = 0;
      if (colon == std::string::npos || !absl::SimpleAtoi(value.substr(colon + 1), &port) ||
          port <= 0 || port > 65535) {
        std::fprintf(stderr, "weft-info: --peer takes HOST:PORT, not '%s'\n", value.c_str());
        return 2;
      }
      peers.emplace_back(value.substr(0, colon), port);
      continue;
    }
    std::fprintf(stderr, "weft-info: unknown or incomplete option '%s'\n%s", arg.c_str(), kUsage);
    return 2;
  }

  absl::StatusOr<topology::Topology> topology = topology::LoadTopology();
  if (!topology.ok()) {
    std::fprintf(stderr, "weft-info: %s\n", std::string(topology.status().message()).c_str());
    return 1;
  }
  if (dump_requested) {
    const std::string text = topology::FormatTopology(*topology);
    if (dump == "-") {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    std::ofstream out(dump);
    out << text;
    out.close();
    if (!out) {
      std::fprintf(stderr, "weft-info: cannot write %s\n", dump.c_str());
      return 1;
    }
    return 0;
  }

  std::printf("Weft on %s (host identity %s)\n", HostName().c_str(), HostIdentity().c_str());
  PrintTopology(*topology);
  PrintBinding(*topology);
  PrintTransports();
  bool ok = PrintInterfaces(*topology);
  int store_port = 0;
  if (!Env("WEFT_ADDR").empty() && absl::SimpleAtoi(Env("WEFT_PORT"), &store_port)) {
    peers.insert(peers.begin(), {Env("WEFT_ADDR"), store_port});
  }
  if (!peers.empty()) {
    std::printf("Peers:\n");
    for (size_t i = 0; i < peers.size(); ++i) {
      const bool store = i == 0 && !Env("WEFT_ADDR").empty() && store_port != 0;
      ok = PrintPeer(store ? "store (WEFT_ADDR:WEFT_PORT)" : "peer", peers[i].first,
                     peers[i].second) &&
           ok;
    }
  }
  PrintConfiguration();
  ok = PrintTuning() && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace weft::info

int main(int argc, char** argv) { return weft::info::Main(argc, argv); }
