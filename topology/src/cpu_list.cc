#include "weft/topology/cpu_list.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weft::topology {
namespace {

// Above any real machine's CPU count; bounds what a corrupt file can make us allocate.
constexpr int kMaxCpu = 65535;

}  // namespace

std::string FormatCpuList(const CpuList& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&text, text.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&text, "-", cpus[j]);
    i = j + 1;
  }
  return text;
}

absl::StatusOr<CpuList> ParseCpuList(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  CpuList cpus;
  if (text.empty()) return cpus;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int first = 0;
    int last = 0;
    const bool ok = absl::SimpleAtoi(ends[0], &first) &&
                    absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &last) && first >= 0 &&
                    first <= last && last <= kMaxCpu;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU list '", text, "': '", part, "' is not a CPU number or range a-b"));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

bool CpuListContains(const CpuList& outer, const CpuList& inner) {
  return std::includes(outer.begin(), outer.end(), inner.begin(), inner.end());
}

}  // namespace weft::topology
