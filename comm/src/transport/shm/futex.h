// Futex waits and wakes on 32-bit words in shared memory.
//
// Ranks on one host sleep on words inside a shared mapping, so these use the shared (non-private)
// futex operations: the kernel keys them by the backing page, not by this process's address, and a
// wake in one process reaches a waiter in another.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft {

// Sleeps while `*word == expected`, for at most `timeout_us` microseconds. Returns when woken,
// when the word already differs, on timeout, or on a signal; callers re-check their condition in
// a loop, so the reason is not reported.
void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us);

// Wakes every process sleeping on `word`.
void FutexWakeAll(const std::atomic<uint32_t>* word);

}  // namespace weft
