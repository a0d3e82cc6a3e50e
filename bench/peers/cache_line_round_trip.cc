// cache_line_round_trip: how long a cache line takes to travel from one CPU to another and back,
// which tells whether the two CPUs share a cache right now.
//
//   cache_line_round_trip [-c cpu,cpu,...] [-n trips]
//
// Two threads, pinned to the first CPU and to one other, pass a counter back and forth through two
// cache lines; a row gives the mean round trip of the pair in nanoseconds, and the last line the
// largest over the pairs. In a virtual machine the host may run two virtual CPUs on cores that
// share a cache or on cores far apart (another chiplet or socket), and move them during a job:
// every algorithm that hands data over shared memory slows with the round trip, while one that
// reads a peer's untouched pages through the kernel (cma_direct) does not. pick-check runs this
// between its jobs to tell the two placements apart. Every wait has a deadline: a partner that
// never runs (its CPU taken away) makes the tool fail instead of hang.
#include <getopt.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace {

constexpr auto kDeadline = std::chrono::seconds(5);

struct Options {
  std::vector<int> cpus;  // empty: the first two CPUs this process may run on
  int64_t trips = 200000;
};

bool ParseOptions(int argc, char** argv, Options* o) {
  int c;
  while ((c = getopt(argc, argv, "c:n:")) != -1) {
    switch (c) {
      case 'c':
        o->cpus.clear();
        for (absl::string_view part : absl::StrSplit(optarg, ',', absl::SkipEmpty())) {
          int cpu = 0;
          if (!absl::SimpleAtoi(part, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) return false;
          // A pair on one CPU would only measure the scheduler.
          if (std::find(o->cpus.begin(), o->cpus.end(), cpu) != o->cpus.end()) return false;
          o->cpus.push_back(cpu);
        }
        if (o->cpus.size() < 2) return false;
        break;
      case 'n':
        if (!absl::SimpleAtoi(optarg, &o->trips) || o->trips < 1) return false;
        break;
      default:
        return false;
    }
  }
  return optind == argc;
}

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Each counter on a line of its own, so that a round trip moves exactly two lines.
struct alignas(64) Line {
  std::atomic<int64_t> value{0};
};

// Spins until `line` reaches `value`; false once the deadline has passed.
bool AwaitValue(const Line& line, int64_t value, std::chrono::steady_clock::time_point deadline) {
  for (uint32_t spins = 1; line.value.load(std::memory_order_acquire) < value; ++spins) {
    if (spins % 4096 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

// The mean round trip between `a` and `b` in nanoseconds, or a negative value on failure.
double RoundTripNs(int a, int b, int64_t trips) {
  Line ping, pong;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  bool partner_ok = true;
  std::thread partner([&] {
    if (!Pin(b)) {
      partner_ok = false;
      pong.value.store(-1, std::memory_order_release);
      return;
    }
    pong.value.store(-2, std::memory_order_release);  // pinned and ready
    for (int64_t i = 1; i <= trips; ++i) {
      if (!AwaitValue(ping, i, deadline)) {
        partner_ok = false;
        return;
      }
      pong.value.store(i, std::memory_order_release);
    }
  });
  bool ok = Pin(a);
  // Both threads run on their CPUs before the clock starts.
  while (ok && pong.value.load(std::memory_order_acquire) == 0) {
    if (std::chrono::steady_clock::now() > deadline) ok = false;
  }
  ok = ok && pong.value.load(std::memory_order_acquire) == -2;
  const auto begin = std::chrono::steady_clock::now();
  for (int64_t i = 1; ok && i <= trips; ++i) {
    ping.value.store(i, std::memory_order_release);
    ok = AwaitValue(pong, i, deadline);
  }
  const auto end = std::chrono::steady_clock::now();
  if (!ok) ping.value.store(trips, std::memory_order_release);  // the partner stops waiting
  partner.join();
  if (!ok || !partner_ok) return -1;
  return std::chrono::duration<double, std::nano>(end - begin).count() / trips;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) {
    std::fprintf(stderr, "usage: %s [-c cpu,cpu,... (distinct)] [-n trips]\n", argv[0]);
    return 2;
  }
  if (options.cpus.empty()) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
      std::perror("sched_getaffinity");
      return 1;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE && options.cpus.size() < 2; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) options.cpus.push_back(cpu);
    }
    if (options.cpus.size() < 2) {
      std::fprintf(stderr, "cache_line_round_trip: this process may run on one CPU only\n");
      return 1;
    }
  }
  double largest = 0;
  for (size_t k = 1; k < options.cpus.size(); ++k) {
    const int a = options.cpus[0], b = options.cpus[k];
    const double ns = RoundTripNs(a, b, options.trips);
    if (ns < 0) {
      std::fprintf(stderr,
                   "cache_line_round_trip: CPUs %d and %d: a thread could not be pinned, or %lld "
                   "round trips took over %lld s (is each CPU allowed and online?)\n",
                   a, b, static_cast<long long>(options.trips),
                   static_cast<long long>(kDeadline.count()));
      return 1;
    }
    std::printf("cpus %d,%d round_trip_ns %.1f\n", a, b, ns);
    std::fflush(stdout);
    largest = std::max(largest, ns);
  }
  std::printf("largest round_trip_ns %.1f\n", largest);
  return 0;
}
