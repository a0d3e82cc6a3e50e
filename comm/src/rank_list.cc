#include "rank_list.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft {

std::string RankList(absl::Span<const int64_t> ranks) {
  if (ranks.empty()) return "no rank";
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrCat("ranks ", absl::StrJoin(parts, ", "));
}

}  // namespace weft
