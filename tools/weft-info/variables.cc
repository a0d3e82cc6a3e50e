#include "variables.h"

#include <cstring>
#include <string>

namespace weft::info {

const std::vector<Variable>& KnownVariables() {
  static const std::vector<Variable> kVariables = {
      // Job placement, set by weftrun (or taken from torchrun, Open MPI, PMI, Slurm).
      {"WEFT_RANK", "", "this process's rank in the job"},
      {"WEFT_SIZE", "", "ranks in the job"},
      {"WEFT_LOCAL_RANK", "", "rank among the ranks on this node"},
      {"WEFT_LOCAL_SIZE", "", "ranks on this node"},
      {"WEFT_NODE_RANK", "", "this node's index"},
      {"WEFT_ADDR", "", "host of the job's rendezvous store"},
      {"WEFT_PORT", "", "port of the job's rendezvous store"},
      {"WEFT_TOKEN", "", "the job's secret, required by the store and every connection"},
      // Communication.
      {"WEFT_TIMEOUT", "300", "seconds any wait may take before it fails"},
      {"WEFT_TRANSPORT", "auto", "auto, shm, tcp or ucx: the transport for links"},
      {"WEFT_ALGO", "", "forced algorithms, e.g. ring or all_reduce=rabenseifner"},
      {"WEFT_SOCKET_IFNAME", "", "interfaces for TCP: prefixes, ^ excludes, = exact"},
      {"WEFT_SOCKET_NSTREAMS", "2", "TCP connections per peer"},
      {"WEFT_SHM_CMA", "0", "1: large shared-memory messages read straight from the peer"},
      {"WEFT_SHARED_BUFFERS", "0", "1: buffers come from AllocShared on every rank"},
      {"WEFT_DEBUG", "", "WARN, INFO or TRACE diagnostics on stderr"},
      {"WEFT_SIMD", "", "scalar, avx2 or avx512: lower the reduction kernels' SIMD level"},
      {"WEFT_TUNING_FILE", "", "the tuner's model, as weft-tune writes it (else built-in)"},
      {"WEFT_FLIGHT_RECORDER_SIZE", "256", "operations each rank remembers; 0 turns it off"},
      {"WEFT_FLIGHT_RECORDER_DIR", "",
       "where flight records are written (else /tmp/weft-flight-*)"},
      // Topology.
      {"WEFT_HOSTNAME", "", "host identity override: ranks with equal values share a host"},
      {"WEFT_TOPO_FILE", "", "topology file (weft-info --dump) used instead of detection"},
      {"WEFT_BIND", "off", "off, auto, gpu, nic or numa: core binding done by weftrun"},
  };
  return kVariables;
}

std::vector<Setting> EffectiveSettings(char** environment) {
  std::vector<Setting> settings;
  for (const Variable& variable : KnownVariables()) {
    Setting setting;
    setting.variable = &variable;
    setting.name = variable.name;
    setting.value = variable.default_value;
    const std::string prefix = std::string(variable.name) + "=";
    for (char** entry = environment; *entry != nullptr; ++entry) {
      if (std::strncmp(*entry, prefix.c_str(), prefix.size()) == 0) {
        setting.value = *entry + prefix.size();
        setting.from_environment = true;
      }
    }
    settings.push_back(std::move(setting));
  }
  for (char** entry = environment; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "WEFT_", 5) != 0) continue;
    const char* eq = std::strchr(*entry, '=');
    if (eq == nullptr) continue;
    const std::string name(*entry, eq - *entry);
    bool known = false;
    for (const Variable& variable : KnownVariables()) known = known || name == variable.name;
    if (!known) settings.push_back(Setting{nullptr, name, eq + 1, true});
  }
  return settings;
}

}  // namespace weft::info
