// The process record every rank publishes at creation (pid, pid namespace, host), read by the
// fault watch of every other rank.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fault_watch.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<weft::RankProcess> process = weft::ParseRankProcess(text);
  if (!process.ok()) return 0;
  FUZZ_CHECK(process->pid > 0);
  absl::StatusOr<weft::RankProcess> again =
      weft::ParseRankProcess(weft::FormatRankProcess(*process));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->pid == process->pid && again->host == process->host &&
             again->host_id == process->host_id && again->pid_namespace == process->pid_namespace);
  return 0;
}
