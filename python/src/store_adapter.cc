#include "store_adapter.h"

#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::torch_backend {

absl::Status StoreAdapter::Set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("c10d store: set '", key, "' failed: ", e.what()));
  }
}

absl::StatusOr<std::string> StoreAdapter::Get(const std::string& key, absl::Duration timeout) {
  // c10d's kNoTimeout (zero) waits forever; any finite wait is at least a millisecond.
  const std::chrono::milliseconds wait_for =
      timeout == absl::InfiniteDuration()
          ? c10d::Store::kNoTimeout
          : std::max(std::chrono::milliseconds(1), absl::ToChronoMilliseconds(timeout));
  try {
    store_->wait({key}, wait_for);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat("c10d store: waiting ",
                                                    absl::FormatDuration(timeout), " for '", key,
                                                    "' failed: ", e.what()));
  }
  try {
    const std::vector<uint8_t> value = store_->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("c10d store: get '", key, "' failed: ", e.what()));
  }
}

}  // namespace weft::torch_backend
