#include "bootstrap/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weft {

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(absl::StrCat(prefix_, key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key, const Deadline& deadline) {
  return base_->Get(absl::StrCat(prefix_, key), deadline);
}

absl::StatusOr<int64_t> PrefixStore::Add(absl::string_view key, int64_t delta) {
  return base_->Add(absl::StrCat(prefix_, key), delta);
}

absl::StatusOr<std::vector<std::string>> StoreAllGather(Store& store, absl::string_view key,
                                                        int rank, int size, absl::string_view value,
                                                        const Deadline& deadline) {
  if (absl::Status s = store.Set(absl::StrCat(key, "/", rank), value); !s.ok()) return s;
  std::vector<std::string> values(size);
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<std::string> v = store.Get(absl::StrCat(key, "/", r), deadline);
    if (!v.ok()) {
      return absl::Status(v.status().code(), absl::StrCat("waiting for rank ", r, " to publish '",
                                                          key, "': ", v.status().message()));
    }
    values[r] = *std::move(v);
  }
  return values;
}

absl::Status StoreBarrier(Store& store, absl::string_view key, int rank, int size,
                          const Deadline& deadline) {
  return StoreAllGather(store, key, rank, size, "", deadline).status();
}

}  // namespace weft
