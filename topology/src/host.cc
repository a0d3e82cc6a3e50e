#include "weft/topology/host.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace weft {

std::string HostName() {
  if (const char* forced = std::getenv("WEFT_HOSTNAME"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string HostIdentity() {
  if (const char* forced = std::getenv("WEFT_HOSTNAME"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  return HostName() + "/" + KernelIdentity();
}

std::string KernelIdentity() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  return boot_id;
}

}  // namespace weft
