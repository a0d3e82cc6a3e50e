// CPU lists: sets of logical CPU numbers (the kernel's, as sched_setaffinity() takes them), in the
// Linux list notation "0-3,8,10-11" that sysfs files such as local_cpulist and `taskset -c` use.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::topology {

// Sorted, without duplicates.
using CpuList = std::vector<int>;

// "0-3,8"; "" for an empty list.
std::string FormatCpuList(const CpuList& cpus);

// Reads "0-3,8" (whitespace around the text is ignored; "" is the empty list). Fails with
// InvalidArgument naming the bad part on anything else, or on CPU numbers above 65535.
absl::StatusOr<CpuList> ParseCpuList(absl::string_view text);

// Whether every CPU of `inner` is in `outer`.
bool CpuListContains(const CpuList& outer, const CpuList& inner);

}  // namespace weft::topology
