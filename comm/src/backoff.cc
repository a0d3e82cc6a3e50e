#include "backoff.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>

namespace weft {
namespace {

constexpr uint32_t kSpinRounds = 200;
constexpr uint32_t kYieldRounds = 2000;

std::atomic<uint32_t> spin_rounds{kSpinRounds};

}  // namespace

void Backoff::SetOversubscribed(bool oversubscribed) {
  spin_rounds.store(oversubscribed ? 0 : kSpinRounds, std::memory_order_relaxed);
}

bool Backoff::Oversubscribed() { return spin_rounds.load(std::memory_order_relaxed) == 0; }

void Backoff::Pause(std::vector<pollfd>* fds, int max_sleep_ms) {
  ++idle_rounds_;
  const uint32_t spin = spin_rounds.load(std::memory_order_relaxed);
  if (idle_rounds_ <= spin) {
    for (int i = 0; i < 16; ++i) CpuRelax();
    return;
  }
  if (idle_rounds_ <= spin + kYieldRounds) {
    sched_yield();
    return;
  }
  // Sleep 50 us, doubling every 64 rounds, up to max_sleep_ms.
  const uint32_t doublings = std::min<uint32_t>((idle_rounds_ - spin - kYieldRounds) / 64, 10);
  const int64_t sleep_us =
      std::min<int64_t>(int64_t{50} << doublings, int64_t{max_sleep_ms} * 1000);
  if (fds != nullptr && !fds->empty()) {
    poll(fds->data(), fds->size(), static_cast<int>(std::max<int64_t>(sleep_us / 1000, 1)));
    return;
  }
  timespec ts{0, static_cast<long>(sleep_us * 1000)};
  nanosleep(&ts, nullptr);
}

}  // namespace weft
