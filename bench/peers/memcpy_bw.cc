// memcpy_bw: how fast this machine copies memory with one and with two threads, the physical
// ceiling next to which compare-peers shows the collectives' bus bandwidth (on one host every
// byte a collective moves is at least one copy through memory).
//
//   memcpy_bw [-s bytes_per_thread] [-n iterations] [-t 1,2]
//
// Each thread copies its own buffers (larger than the caches by default); a row gives the best
// of the iterations, in decimal GB/s of bytes copied (each read once and written once), summed
// over the threads.
#include <getopt.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace {

struct Options {
  size_t bytes = size_t{256} << 20;
  int iterations = 5;
  std::vector<int> threads = {1, 2};
};

bool ParseOptions(int argc, char** argv, Options* o) {
  int c;
  while ((c = getopt(argc, argv, "s:n:t:")) != -1) {
    switch (c) {
      case 's': {
        uint64_t bytes = 0;
        if (!absl::SimpleAtoi(optarg, &bytes) || bytes == 0) return false;
        o->bytes = bytes;
        break;
      }
      case 'n':
        if (!absl::SimpleAtoi(optarg, &o->iterations) || o->iterations < 1) return false;
        break;
      case 't':
        o->threads.clear();
        for (absl::string_view part : absl::StrSplit(optarg, ',', absl::SkipEmpty())) {
          int n = 0;
          if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 256) return false;
          o->threads.push_back(n);
        }
        if (o->threads.empty()) return false;
        break;
      default:
        return false;
    }
  }
  return optind == argc;
}

// The shortest wall time, over the iterations, for `threads` threads to each copy `bytes`.
double BestSeconds(size_t bytes, int threads, int iterations) {
  std::vector<std::vector<char>> from(threads), to(threads);
  for (int t = 0; t < threads; ++t) {
    // Written once so that the timed copies meet resident pages, not page faults.
    from[t].assign(bytes, static_cast<char>(t + 1));
    to[t].assign(bytes, 0);
  }
  double best = 0;
  for (int i = 0; i < iterations; ++i) {
    std::barrier start(threads + 1);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        start.arrive_and_wait();
        std::memcpy(to[t].data(), from[t].data(), bytes);
      });
    }
    // The clock starts before the release so that no copy begins untimed.
    const auto begin = std::chrono::steady_clock::now();
    start.arrive_and_wait();
    for (std::thread& w : workers) w.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (i == 0 || seconds < best) best = seconds;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) {
    std::fprintf(stderr, "usage: %s [-s bytes_per_thread] [-n iterations] [-t 1,2]\n", argv[0]);
    return 2;
  }
  std::printf("# memcpy_bw: best of %d, bytes copied per second summed over threads\n",
              options.iterations);
  std::printf("# %7s  %12s  %10s  %7s\n", "threads", "bytes", "time(us)", "GB/s");
  for (int threads : options.threads) {
    const double seconds = BestSeconds(options.bytes, threads, options.iterations);
    std::printf("%9d  %12zu  %10.1f  %7.2f\n", threads, options.bytes, seconds * 1e6,
                static_cast<double>(options.bytes) * threads / seconds / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
