#include "transport/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace weft {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the kernel reads futex words as plain 32-bit integers");

void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us) {
  if (timeout_us <= 0) return;
  timespec timeout{static_cast<time_t>(timeout_us / 1000000),
                   static_cast<long>(timeout_us % 1000000) * 1000};
  // EAGAIN (the word already changed), ETIMEDOUT and EINTR all mean "go and look again".
  syscall(SYS_futex, const_cast<std::atomic<uint32_t>*>(word), FUTEX_WAIT, expected, &timeout,
          nullptr, 0);
}

void FutexWakeAll(const std::atomic<uint32_t>* word) {
  syscall(SYS_futex, const_cast<std::atomic<uint32_t>*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace weft
