#include "weft/topology/discover.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "weft/topology/host.h"
#include "weft/topology/topology_text.h"

#ifdef WEFT_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace weft::topology {
namespace {

namespace fs = std::filesystem;

// The first line of a sysfs file, or "" when it cannot be read (virtual devices refuse some).
std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

CpuList ReadCpuListFile(const fs::path& path) {
  absl::StatusOr<CpuList> cpus = ParseCpuList(ReadLine(path));
  return cpus.ok() ? *std::move(cpus) : CpuList{};
}

// The PCI device an interface's sysfs device path leads through, e.g. "0000:00:03.0" for
// /sys/devices/pci0000:00/0000:00:03.0/virtio0; "" when there is none.
// Whether `name` is a PCI address "dddd:bb:dd.f" (lower-case hex, function 0-7).
bool IsPciBusId(const std::string& name) {
  static constexpr char kShape[] = "xxxx:xx:xx.f";
  if (name.size() != sizeof(kShape) - 1) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    switch (kShape[i]) {
      case 'x':
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        break;
      case 'f':
        if (c < '0' || c > '7') return false;
        break;
      default:
        if (c != kShape[i]) return false;
    }
  }
  return true;
}

std::string PciBusIdOf(const fs::path& device_link) {
  std::error_code error;
  const fs::path real = fs::canonical(device_link, error);
  if (error) return "";
  std::string found;
  for (const fs::path& part : real) {
    if (IsPciBusId(part.string())) found = part.string();
  }
  return found;
}

int PrefixLength(const sockaddr* netmask) {
  if (netmask == nullptr || netmask->sa_family != AF_INET) return 32;
  const uint32_t mask = ntohl(reinterpret_cast<const sockaddr_in*>(netmask)->sin_addr.s_addr);
  return __builtin_popcount(mask);
}

#ifdef WEFT_HAVE_HWLOC

CpuList FromBitmap(hwloc_const_bitmap_t set) {
  CpuList cpus;
  if (set == nullptr) return cpus;
  unsigned i = 0;
  hwloc_bitmap_foreach_begin(i, set) { cpus.push_back(static_cast<int>(i)); }
  hwloc_bitmap_foreach_end();
  return cpus;
}

int PackageOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
  return package == nullptr ? -1 : static_cast<int>(package->logical_index);
}

PciKind Classify(uint16_t class_id) {
  const uint16_t base = class_id >> 8;
  if (class_id == 0x0300 || class_id == 0x0302 || base == 0x12) return PciKind::kGpu;
  if (base == 0x02) return PciKind::kNic;
  return PciKind::kOther;
}

absl::Status DetectWithHwloc(Topology* t) {
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) {
    return absl::InternalError(absl::StrCat("hwloc_topology_init: ", std::strerror(errno)));
  }
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    const int err = errno;
    hwloc_topology_destroy(topo);
    return absl::InternalError(absl::StrCat("hwloc_topology_load: ", std::strerror(err)));
  }
  const unsigned api = hwloc_get_api_version();
  t->source = absl::StrCat("hwloc (API ", api >> 16, ".", (api >> 8) & 0xff, ")");
  t->packages = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
  for (hwloc_obj_t obj = nullptr;
       (obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) != nullptr;) {
    NumaNode node;
    node.os_index = static_cast<int>(obj->os_index);
    node.package = PackageOf(topo, obj);
    node.memory_bytes = obj->attr != nullptr ? obj->attr->numanode.local_memory : 0;
    node.cpus = FromBitmap(obj->cpuset);
    t->numa_nodes.push_back(std::move(node));
  }
  for (hwloc_obj_t obj = nullptr;
       (obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, obj)) != nullptr;) {
    Core core;
    core.package = PackageOf(topo, obj);
    core.cpus = FromBitmap(obj->cpuset);
    if (core.cpus.empty()) continue;
    const NumaNode* numa = t->NumaOf(core.cpus.front());
    core.numa = numa == nullptr ? -1 : numa->os_index;
    t->cores.push_back(std::move(core));
  }
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE}) {
    for (hwloc_obj_t obj = nullptr;
         (obj = hwloc_get_next_obj_by_type(topo, type, obj)) != nullptr;) {
      if (obj->attr == nullptr || obj->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      t->caches.push_back(Cache{static_cast<int>(obj->attr->cache.depth), obj->attr->cache.size,
                                FromBitmap(obj->cpuset)});
    }
  }
  for (hwloc_obj_t obj = nullptr; (obj = hwloc_get_next_pcidev(topo, obj)) != nullptr;) {
    const auto& pci = obj->attr->pcidev;
    PciDevice device;
    device.bus_id = absl::StrFormat("%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.dev, pci.func);
    device.class_id = pci.class_id;
    device.kind = Classify(pci.class_id);
    device.vendor_id = pci.vendor_id;
    device.device_id = pci.device_id;
    device.link_gbps = pci.linkspeed;
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, obj);
    if (near != nullptr) device.cpus = FromBitmap(near->cpuset);
    for (hwloc_obj_t child = obj->io_first_child; child != nullptr; child = child->next_sibling) {
      if (child->type == HWLOC_OBJ_OS_DEVICE && child->name != nullptr) {
        device.os_devices.emplace_back(child->name);
      }
    }
    t->pci_devices.push_back(std::move(device));
  }
  hwloc_topology_destroy(topo);
  return absl::OkStatus();
}

#else  // !WEFT_HAVE_HWLOC

absl::Status DetectWithSysfs(Topology* t) {
  t->source = "sysfs (built without hwloc)";
  CpuList online = ReadCpuListFile("/sys/devices/system/cpu/online");
  if (online.empty()) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < n; ++cpu) online.push_back(static_cast<int>(cpu));
  }
  t->packages = 1;
  t->numa_nodes.push_back(NumaNode{0, 0, 0, online});
  for (int cpu : online) t->cores.push_back(Core{0, 0, {cpu}});
  return absl::OkStatus();
}

#endif  // WEFT_HAVE_HWLOC

}  // namespace

bool HaveHwloc() {
#ifdef WEFT_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::vector<NetInterface>> DetectInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::UnavailableError(
        absl::StrCat("listing network interfaces (getifaddrs): ", std::strerror(errno)));
  }
  std::map<std::string, NetInterface> by_name;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    NetInterface& nic = by_name[it->ifa_name];
    nic.name = it->ifa_name;
    nic.up = (it->ifa_flags & IFF_UP) != 0;
    nic.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr, ip,
              sizeof(ip));
    nic.ipv4.push_back(absl::StrCat(ip, "/", PrefixLength(it->ifa_netmask)));
  }
  freeifaddrs(list);

  std::vector<NetInterface> interfaces;
  for (auto& [name, nic] : by_name) {
    const fs::path dir = fs::path("/sys/class/net") / name;
    int64_t speed = -1;
    // Virtual interfaces refuse the read, and a link that is down reports -1.
    if (!absl::SimpleAtoi(ReadLine(dir / "speed"), &speed) || speed <= 0) speed = -1;
    nic.speed_mbps = speed;
    nic.pci_bus_id = PciBusIdOf(dir / "device");
    // The PCI function itself knows its locality even when the interface hangs off a child
    // device (virtio) that does not.
    if (!nic.pci_bus_id.empty()) {
      nic.cpus =
          ReadCpuListFile(fs::path("/sys/bus/pci/devices") / nic.pci_bus_id / "local_cpulist");
    }
    interfaces.push_back(std::move(nic));
  }
  return interfaces;
}

absl::StatusOr<Topology> Detect() {
  Topology topology;
  topology.hostname = HostName();
#ifdef WEFT_HAVE_HWLOC
  absl::Status detected = DetectWithHwloc(&topology);
#else
  absl::Status detected = DetectWithSysfs(&topology);
#endif
  if (!detected.ok()) {
    return absl::Status(detected.code(), absl::StrCat("detecting the topology of ",
                                                      topology.hostname, ": ", detected.message()));
  }
  absl::StatusOr<std::vector<NetInterface>> interfaces = DetectInterfaces();
  if (!interfaces.ok()) return interfaces.status();
  topology.interfaces = *std::move(interfaces);
  return topology;
}

absl::StatusOr<Topology> LoadTopology() {
  const char* file = std::getenv("WEFT_TOPO_FILE");
  if (file == nullptr || *file == '\0') return Detect();
  absl::StatusOr<Topology> loaded = ReadTopologyFile(file);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("WEFT_TOPO_FILE: ", loaded.status().message()));
  }
  return loaded;
}

}  // namespace weft::topology
