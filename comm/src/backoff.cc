#include "backoff.h"

#include <sched.h>
#include <time.h>

#include <algorithm>

namespace weft {
namespace {

constexpr uint32_t kSpinRounds = 200;
constexpr uint32_t kYieldRounds = 2000;

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void Backoff::Pause(std::vector<pollfd>* fds, int max_sleep_ms) {
  ++idle_rounds_;
  if (idle_rounds_ <= kSpinRounds) {
    for (int i = 0; i < 16; ++i) CpuRelax();
    return;
  }
  if (idle_rounds_ <= kSpinRounds + kYieldRounds) {
    sched_yield();
    return;
  }
  // Sleep 50 us, doubling every 64 rounds, up to max_sleep_ms.
  const uint32_t doublings = std::min<uint32_t>((idle_rounds_ - kSpinRounds - kYieldRounds) / 64, 10);
  const int64_t sleep_us = std::min<int64_t>(int64_t{50} << doublings, int64_t{max_sleep_ms} * 1000);
  if (fds != nullptr && !fds->empty()) {
    poll(fds->data(), fds->size(), static_cast<int>(std::max<int64_t>(sleep_us / 1000, 1)));
    return;
  }
  timespec ts{0, static_cast<long>(sleep_us * 1000)};
  nanosleep(&ts, nullptr);
}

}  // namespace weft
