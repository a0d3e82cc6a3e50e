#include "algorithms/dissemination.h"

namespace weft {

absl::Status DisseminationBarrier::Run() {
  const int p = peers_.size(), r = peers_.rank();
  uint32_t step = 0;
  for (int distance = 1; distance < p; distance *= 2, ++step) {
    Transfer sent = peers_.Send((r + distance) % p, step, nullptr, 0);
    Transfer received = peers_.Recv((r - distance + p) % p, step, RecvSink::Copy(nullptr), 0);
    if (absl::Status s = peers_.Wait({sent, received}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace weft
