// The error-feedback state of a reducer's compressed collectives (one per bucket or unit), saved
// back to back in their order and cut apart again on restore: the reducers' checkpoint form.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weft::shard {

// Every collective's errors(), in order.
template <typename Compressed>
std::vector<float> JoinErrors(const std::vector<Compressed*>& all) {
  std::vector<float> joined;
  for (const Compressed* c : all) {
    const auto& mine = c->errors();
    joined.insert(joined.end(), mine.begin(), mine.end());
  }
  return joined;
}

// Gives each collective its share of `errors`. InvalidArgument naming `who` (nothing restored)
// when the total differs: a different plan or codec saved them.
template <typename Compressed>
absl::Status SplitErrors(const std::vector<Compressed*>& all, const std::vector<float>& errors,
                         const char* who) {
  size_t total = 0;
  for (const Compressed* c : all) total += c->errors().size();
  if (errors.size() != total) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", errors.size(),
                                                   " saved error-feedback values for ", total,
                                                   " (a different plan, layout or codec)"));
  }
  size_t at = 0;
  for (Compressed* c : all) {
    const size_t n = c->errors().size();
    if (absl::Status s =
            c->RestoreErrors(std::vector<float>(errors.begin() + at, errors.begin() + at + n));
        !s.ok()) {
      return s;
    }
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace weft::shard
