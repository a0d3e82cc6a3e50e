#include "backoff.h"

#include <sched.h>
#include <time.h>

#include <algorithm>

namespace weft {
namespace {

constexpr uint32_t kSpinRounds = 200;
// With a core of its own a yield returns at once, so 2000 of them keep the waiter a fraction of a
// millisecond from the data. Oversubscribed, every yield may hand the core to another rank's
// yielding waiter instead of the one that would end the wait, so there the waiter soon sleeps.
constexpr uint32_t kYieldRounds = 2000;
constexpr uint32_t kOversubscribedYieldRounds = 64;

}  // namespace

Backoff::Backoff(bool oversubscribed)
    : spin_rounds_(oversubscribed ? 0 : kSpinRounds),
      yield_rounds_(oversubscribed ? kOversubscribedYieldRounds : kYieldRounds) {}

void Backoff::Pause(std::vector<pollfd>* fds, int max_sleep_ms) {
  ++idle_rounds_;
  const uint32_t spin = spin_rounds_;
  const uint32_t yields = yield_rounds_;
  if (idle_rounds_ <= spin) {
    for (int i = 0; i < 16; ++i) CpuRelax();
    return;
  }
  if (idle_rounds_ <= spin + yields) {
    sched_yield();
    return;
  }
  // Sleep 50 us, doubling every 64 rounds, up to max_sleep_ms.
  const uint32_t doublings = std::min<uint32_t>((idle_rounds_ - spin - yields) / 64, 10);
  const int64_t sleep_us =
      std::min<int64_t>(int64_t{50} << doublings, int64_t{max_sleep_ms} * 1000);
  const timespec ts{static_cast<time_t>(sleep_us / 1'000'000),
                    static_cast<long>(sleep_us % 1'000'000 * 1000)};
  if (fds != nullptr && !fds->empty()) {
    // ppoll, not poll: poll's milliseconds would stretch the first sleeps from 50 us to 1 ms,
    // and a wait on a shared-memory link, which has no descriptor to wake it, would pay them.
    ppoll(fds->data(), fds->size(), &ts, nullptr);
    return;
  }
  nanosleep(&ts, nullptr);
}

}  // namespace weft
