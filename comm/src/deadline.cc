#include "deadline.h"

#include <time.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weft {

Deadline Deadline::InCoarse(absl::Duration timeout, const std::atomic<bool>* aborted) {
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return Deadline(absl::TimeFromTimespec(now) + timeout, aborted);
}

absl::Status Deadline::Check(absl::string_view what) const {
  if (Aborted()) return absl::CancelledError(absl::StrCat(what, ": communicator aborted"));
  if (Expired()) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
  return absl::OkStatus();
}

int Deadline::PollTimeoutMs(int cap_ms) const {
  if (when_ == absl::InfiniteFuture()) return cap_ms;
  const int64_t left = absl::ToInt64Milliseconds(Remaining());
  return static_cast<int>(std::clamp<int64_t>(left, 0, cap_ms));
}

}  // namespace weft
