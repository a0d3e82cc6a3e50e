#include "weft/topology/topology_text.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weft::topology {
namespace {

constexpr absl::string_view kHeader = "weft-topology 1";

std::string ListOr(const std::vector<std::string>& items) {
  return items.empty() ? "-" : absl::StrJoin(items, ",");
}

std::string CpusOr(const CpuList& cpus) { return cpus.empty() ? "-" : FormatCpuList(cpus); }

std::string Hex(unsigned value) { return absl::StrFormat("0x%04x", value); }

// The fields of one line: the item kind, an optional leading name, then "key value" pairs.
class Fields {
 public:
  Fields(std::vector<absl::string_view> words, bool named) : words_(std::move(words)) {
    size_t at = 1;
    if (named && words_.size() > 1) name_ = words_[at++];
    for (; at + 1 < words_.size(); at += 2) pairs_[std::string(words_[at])] = words_[at + 1];
    odd_ = at < words_.size();
  }

  absl::string_view name() const { return name_; }
  bool odd() const { return odd_; }

  // The value of `key`, or an error naming it.
  absl::StatusOr<absl::string_view> Get(absl::string_view key) const {
    auto it = pairs_.find(std::string(key));
    if (it == pairs_.end()) return absl::InvalidArgumentError(absl::StrCat("no '", key, "' field"));
    return it->second;
  }

 private:
  std::vector<absl::string_view> words_;
  absl::string_view name_;
  std::map<std::string, absl::string_view> pairs_;
  bool odd_ = false;
};

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

template <typename T>
absl::Status GetInt(const Fields& f, absl::string_view key, T* out) {
  absl::StatusOr<absl::string_view> text = f.Get(key);
  if (!text.ok()) return text.status();
  int64_t value = 0;
  uint64_t hex = 0;
  bool ok = false;
  if (absl::string_view digits = *text; absl::ConsumePrefix(&digits, "0x")) {
    ok = absl::SimpleHexAtoi(digits, &hex) && hex <= uint64_t{INT64_MAX};
    value = static_cast<int64_t>(hex);
  } else {
    ok = absl::SimpleAtoi(*text, &value);
  }
  if (!ok || value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (value > 0 &&
       static_cast<uint64_t>(value) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return Bad(absl::StrCat("'", key, "' is not a number in range: ", *text));
  }
  *out = static_cast<T>(value);
  return absl::OkStatus();
}

absl::Status GetCpus(const Fields& f, CpuList* out) {
  absl::StatusOr<absl::string_view> text = f.Get("cpus");
  if (!text.ok()) return text.status();
  if (*text == "-") {
    out->clear();
    return absl::OkStatus();
  }
  absl::StatusOr<CpuList> cpus = ParseCpuList(*text);
  if (!cpus.ok()) return cpus.status();
  *out = *std::move(cpus);
  return absl::OkStatus();
}

absl::Status GetList(const Fields& f, absl::string_view key, std::vector<std::string>* out) {
  absl::StatusOr<absl::string_view> text = f.Get(key);
  if (!text.ok()) return text.status();
  out->clear();
  if (*text == "-") return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(*text, ',')) out->emplace_back(item);
  return absl::OkStatus();
}

absl::Status GetFlag(const Fields& f, absl::string_view key, bool* out) {
  int value = 0;
  if (absl::Status s = GetInt(f, key, &value); !s.ok()) return s;
  if (value != 0 && value != 1) return Bad(absl::StrCat("'", key, "' must be 0 or 1"));
  *out = value == 1;
  return absl::OkStatus();
}

absl::Status ParseLine(absl::string_view kind, const Fields& f, Topology* t) {
  if (kind == "hostname") {
    if (f.name().empty()) return Bad("the hostname is missing");
    t->hostname = std::string(f.name());
    return absl::OkStatus();
  }
  if (kind == "packages") {
    if (!absl::SimpleAtoi(f.name(), &t->packages) || t->packages < 0) {
      return Bad("the package count is not a number");
    }
    return absl::OkStatus();
  }
  if (kind == "numa") {
    NumaNode node;
    if (!absl::SimpleAtoi(f.name(), &node.os_index)) return Bad("the NUMA node number is missing");
    absl::Status s = GetInt(f, "package", &node.package);
    if (s.ok()) s = GetInt(f, "memory", &node.memory_bytes);
    if (s.ok()) s = GetCpus(f, &node.cpus);
    if (s.ok()) t->numa_nodes.push_back(std::move(node));
    return s;
  }
  if (kind == "core") {
    Core core;
    absl::Status s = GetInt(f, "package", &core.package);
    if (s.ok()) s = GetInt(f, "numa", &core.numa);
    if (s.ok()) s = GetCpus(f, &core.cpus);
    if (s.ok()) t->cores.push_back(std::move(core));
    return s;
  }
  if (kind == "cache") {
    Cache cache;
    absl::string_view level = f.name();
    if (!absl::ConsumePrefix(&level, "L") || !absl::SimpleAtoi(level, &cache.level)) {
      return Bad("the cache level is not L<n>");
    }
    absl::Status s = GetInt(f, "bytes", &cache.bytes);
    if (s.ok()) s = GetCpus(f, &cache.cpus);
    if (s.ok()) t->caches.push_back(std::move(cache));
    return s;
  }
  if (kind == "pci") {
    PciDevice device;
    device.bus_id = std::string(f.name());
    if (device.bus_id.empty()) return Bad("the PCI bus id is missing");
    absl::StatusOr<absl::string_view> device_kind = f.Get("kind");
    if (!device_kind.ok()) return device_kind.status();
    if (*device_kind == "gpu") {
      device.kind = PciKind::kGpu;
    } else if (*device_kind == "nic") {
      device.kind = PciKind::kNic;
    } else if (*device_kind != "other") {
      return Bad(absl::StrCat("kind '", *device_kind, "' is not gpu, nic or other"));
    }
    absl::Status s = GetInt(f, "class", &device.class_id);
    if (s.ok()) s = GetInt(f, "vendor", &device.vendor_id);
    if (s.ok()) s = GetInt(f, "device", &device.device_id);
    if (s.ok()) {
      absl::StatusOr<absl::string_view> link = f.Get("link");
      if (!link.ok()) return link.status();
      if (!absl::SimpleAtof(*link, &device.link_gbps)) return Bad("'link' is not a number");
    }
    if (s.ok()) s = GetCpus(f, &device.cpus);
    if (s.ok()) s = GetList(f, "os", &device.os_devices);
    if (s.ok()) t->pci_devices.push_back(std::move(device));
    return s;
  }
  if (kind == "interface") {
    NetInterface nic;
    nic.name = std::string(f.name());
    if (nic.name.empty()) return Bad("the interface name is missing");
    absl::StatusOr<absl::string_view> pci = f.Get("pci");
    if (!pci.ok()) return pci.status();
    nic.pci_bus_id = *pci == "-" ? "" : std::string(*pci);
    absl::Status s = GetInt(f, "speed", &nic.speed_mbps);
    if (s.ok()) s = GetFlag(f, "up", &nic.up);
    if (s.ok()) s = GetFlag(f, "loopback", &nic.loopback);
    if (s.ok()) s = GetList(f, "ipv4", &nic.ipv4);
    if (s.ok()) s = GetCpus(f, &nic.cpus);
    if (s.ok()) t->interfaces.push_back(std::move(nic));
    return s;
  }
  return Bad(absl::StrCat("unknown item '", kind, "'"));
}

}  // namespace

std::string FormatTopology(const Topology& t) {
  std::string text = absl::StrCat(kHeader, "\n");
  if (!t.source.empty()) absl::StrAppend(&text, "# source: ", t.source, "\n");
  absl::StrAppend(&text, "hostname ", t.hostname.empty() ? "-" : t.hostname, "\n");
  absl::StrAppend(&text, "packages ", t.packages, "\n");
  for (const NumaNode& n : t.numa_nodes) {
    absl::StrAppend(&text, "numa ", n.os_index, " package ", n.package, " memory ", n.memory_bytes,
                    " cpus ", CpusOr(n.cpus), "\n");
  }
  for (const Core& c : t.cores) {
    absl::StrAppend(&text, "core package ", c.package, " numa ", c.numa, " cpus ", CpusOr(c.cpus),
                    "\n");
  }
  for (const Cache& c : t.caches) {
    absl::StrAppend(&text, "cache L", c.level, " bytes ", c.bytes, " cpus ", CpusOr(c.cpus), "\n");
  }
  for (const PciDevice& d : t.pci_devices) {
    absl::StrAppend(&text, "pci ", d.bus_id, " kind ", Name(d.kind), " class ", Hex(d.class_id),
                    " vendor ", Hex(d.vendor_id), " device ", Hex(d.device_id), " link ",
                    absl::StrFormat("%.9g", d.link_gbps), " cpus ", CpusOr(d.cpus), " os ",
                    ListOr(d.os_devices), "\n");
  }
  for (const NetInterface& i : t.interfaces) {
    absl::StrAppend(&text, "interface ", i.name, " pci ", i.pci_bus_id.empty() ? "-" : i.pci_bus_id,
                    " speed ", i.speed_mbps, " up ", i.up ? 1 : 0, " loopback ", i.loopback ? 1 : 0,
                    " ipv4 ", ListOr(i.ipv4), " cpus ", CpusOr(i.cpus), "\n");
  }
  return text;
}

absl::StatusOr<Topology> ParseTopology(absl::string_view text, absl::string_view origin) {
  Topology topology;
  topology.source = std::string(origin);
  bool header = false;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&](const absl::Status& why) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology ", origin, " line ", number, " '", line, "': ", why.message()));
    };
    if (!header) {
      if (line != kHeader) {
        return fail(Bad(absl::StrCat("expected '", kHeader,
                                     "' first (a file written by "
                                     "`weft-info --dump`)")));
      }
      header = true;
      continue;
    }
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const absl::string_view kind = words[0];
    const Fields fields(std::move(words), /*named=*/kind != "core");
    if (fields.odd()) return fail(Bad("a field has no value"));
    if (absl::Status s = ParseLine(kind, fields, &topology); !s.ok()) return fail(s);
  }
  if (!header) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", origin, " is empty: expected '", kHeader, "' first"));
  }
  if (topology.hostname == "-") topology.hostname.clear();
  return topology;
}

absl::StatusOr<Topology> ReadTopologyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open topology file ", path, ": ",
                                            std::strerror(errno),
                                            " (write one with `weft-info --dump FILE`)"));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  return ParseTopology(contents.str(), absl::StrCat("file ", path));
}

}  // namespace weft::topology
