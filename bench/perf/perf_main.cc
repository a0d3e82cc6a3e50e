// An nccl-tests-compatible benchmark: same flags, timing method, table and bus bandwidth.
// One binary per collective (WEFT_PERF_COLLECTIVE), one process per rank, under weftrun, mpirun
// or torchrun-style variables. ../shared/specs/nccl-tests.md describes what is mirrored.
//
//   weftrun -n 4 all_reduce_perf -b 8 -e 128M -f 2 [-o sum] [-d float] [-n 20] [-w 1] [-c 1]
#include <getopt.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/expected_values.h"
#include "weft/comm/communicator.h"

namespace weft::bench {
namespace {

struct Options {
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  double step_factor = 1;
  size_t step_bytes = 1 << 20;
  bool multiplicative = false;
  int iters = 20;
  int warmup = 1;
  int check = 1;
  int average = 1;
  int timeout_s = 0;
  ReduceOp op = ReduceOp::kSum;
  DataType type = DataType::kFloat32;
  std::string algorithm;
};

// "8", "1K", "128M", "1.5G": powers of two, like nccl-tests.
bool ParseSize(const char* text, size_t* out) {
  std::string s(text);
  double scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
      case 'k':
        scale = 1 << 10;
        s.pop_back();
        break;
      case 'M':
      case 'm':
        scale = 1 << 20;
        s.pop_back();
        break;
      case 'G':
      case 'g':
        scale = double(1 << 30);
        s.pop_back();
        break;
      default:
        break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(s, &value) || value < 0) return false;
  *out = static_cast<size_t>(value * scale);
  return true;
}

void Usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters]\n"
               "          [-w warmup] [-c check] [-o sum|prod|min|max|avg] [-d type]\n"
               "          [-a 0|1|2|3] [-T timeout_s] [-A algorithm]\n",
               prog);
}

bool ParseOptions(int argc, char** argv, Options* o) {
  static const option kLong[] = {{"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"algorithm", required_argument, nullptr, 'A'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"nthreads", required_argument, nullptr, 't'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:a:T:A:g:t:h", kLong, nullptr)) != -1) {
    bool ok = true;
    switch (c) {
      case 'b':
        ok = ParseSize(optarg, &o->min_bytes);
        break;
      case 'e':
        ok = ParseSize(optarg, &o->max_bytes);
        break;
      case 'f':
        ok = absl::SimpleAtod(optarg, &o->step_factor) && o->step_factor >= 1;
        o->multiplicative = true;
        break;
      case 'i':
        ok = ParseSize(optarg, &o->step_bytes);
        o->multiplicative = false;
        break;
      case 'n':
        ok = absl::SimpleAtoi(optarg, &o->iters) && o->iters > 0;
        break;
      case 'w':
        ok = absl::SimpleAtoi(optarg, &o->warmup) && o->warmup >= 0;
        break;
      case 'c':
        ok = absl::SimpleAtoi(optarg, &o->check) && o->check >= 0;
        break;
      case 'a':
        ok = absl::SimpleAtoi(optarg, &o->average) && o->average >= 0 && o->average <= 3;
        break;
      case 'T':
        ok = absl::SimpleAtoi(optarg, &o->timeout_s) && o->timeout_s >= 0;
        break;
      case 'A':
        o->algorithm = optarg;
        break;
      case 'g':
      case 't':
        break;  // GPU/thread counts: one rank per process on CPU
      case 'o': {
        auto op = ParseReduceOp(optarg);
        ok = op.has_value();
        if (ok) o->op = *op;
        break;
      }
      case 'd': {
        auto type = ParseDataType(optarg);
        ok = type.has_value();
        if (ok) o->type = *type;
        break;
      }
      default:
        ok = false;
    }
    if (!ok) {
      Usage(argv[0]);
      return false;
    }
  }
  if (o->multiplicative && o->step_factor == 1) o->multiplicative = false;
  return o->min_bytes <= o->max_bytes;
}

// "%.2f" if it fits the column, else fewer decimals, else an exponent (nccl-tests' rule).
std::string Number(double v, int width) {
  for (int decimals : {2, 1, 0}) {
    std::string s = absl::StrFormat("%.*f", decimals, v);
    if (static_cast<int>(s.size()) <= width) return s;
  }
  return absl::StrFormat("%.1e", v);
}

class AllReducePerf {
 public:
  AllReducePerf(Communicator& comm, const Options& o) : comm_(comm), o_(o) {}

  // Returns the number of wrong elements (summed over ranks) or -1 on a communication error.
  int Run() {
    const int p = comm_.size();
    PrintHeader();
    double bw_sum = 0;
    int bw_values = 0;
    int64_t total_wrong = 0;
    const size_t es = SizeOf(o_.type);
    for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes;) {
      const size_t count = bytes / es;
      std::string row = absl::StrFormat("%12li  %12li  %8s  %6s  %6i", count * es, count,
                                        Name(o_.type), Name(o_.op), -1);
      for (bool in_place : {false, true}) {
        Result r = Measure(count, in_place);
        if (!r.status.ok()) {
          std::fprintf(stderr, "# error: %s\n", r.status.ToString().c_str());
          return -1;
        }
        const double seconds = r.seconds;
        const double algbw = seconds > 0 ? count * es / seconds / 1e9 : 0;
        const double busbw = algbw * 2.0 * (p - 1) / p;
        bw_sum += busbw;
        ++bw_values;
        total_wrong += r.wrong < 0 ? 0 : r.wrong;
        absl::StrAppendFormat(&row, "  %7s  %6s  %6s", Number(seconds * 1e6, 7), Number(algbw, 6),
                              Number(busbw, 6));
        if (o_.check) {
          absl::StrAppendFormat(&row, "  %6g", static_cast<double>(r.wrong));
        } else {
          absl::StrAppendFormat(&row, "  %6s", "N/A");
        }
      }
      if (comm_.rank() == 0) std::printf("%s\n", row.c_str());
      std::fflush(stdout);
      if (bytes == o_.max_bytes) break;
      const size_t next =
          o_.multiplicative ? static_cast<size_t>(bytes * o_.step_factor) : bytes + o_.step_bytes;
      bytes = std::max(next, bytes + 1) > o_.max_bytes ? o_.max_bytes : std::max(next, bytes + 1);
      if (bytes < o_.min_bytes) break;
    }
    if (comm_.rank() == 0) {
      std::printf("# Out of bounds values : %d %s\n", 0, "OK");
      std::printf("# Avg bus bandwidth    : %g \n", bw_values ? bw_sum / bw_values : 0.0);
      std::printf("#\n# Collective test concluded: all_reduce_perf\n#\n\n");
    }
    return static_cast<int>(total_wrong);
  }

 private:
  struct Result {
    absl::Status status;
    double seconds = 0;
    int64_t wrong = 0;
  };

  void PrintHeader() {
    if (comm_.rank() != 0) return;
    std::printf("# nccl-tests-compatible weft %s\n", "0.1.0");
    std::printf("# Collective test starting: all_reduce_perf\n");
    std::printf(
        "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: "
        "%d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
        o_.min_bytes, o_.max_bytes,
        o_.multiplicative ? absl::StrFormat("%g(factor)", o_.step_factor).c_str()
                          : absl::StrFormat("%zu(bytes)", o_.step_bytes).c_str(),
        o_.warmup, o_.iters, o_.check);
    std::printf("#\n# Using devices\n");
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [cpu] %s\n", 0, getpid(),
                "localhost", 0, "weft");
    std::printf("#\n");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "", "",
                "", "", "", "out-of-place", "", "", "", "in-place", "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
    std::fflush(stdout);
  }

  Result Measure(size_t count, bool in_place) {
    Result result;
    const size_t es = SizeOf(o_.type);
    const int rank = comm_.rank(), p = comm_.size();
    send_.resize(count * es);
    recv_.resize(count * es);
    for (size_t i = 0; i < count; ++i) {
      testing::Store(o_.type, testing::InputValue(o_.type, o_.op, rank, i), &send_[i * es]);
    }
    void* out = in_place ? send_.data() : recv_.data();
    auto issue = [&] { return comm_.AllReduce(send_.data(), out, count, o_.type, o_.op); };
    for (int i = 0; i < o_.warmup; ++i) {
      if (absl::Status s = issue().Wait(); !s.ok()) return {s, 0, 0};
    }
    if (absl::Status s = comm_.Barrier().Wait(); !s.ok()) return {s, 0, 0};
    const absl::Time start = absl::Now();
    Work last;
    for (int i = 0; i < o_.iters; ++i) last = issue();
    if (absl::Status s = last.Wait(); !s.ok()) return {s, 0, 0};
    double seconds = absl::ToDoubleSeconds(absl::Now() - start) / o_.iters;
    // Combine the per-rank times as -a asks: 0 rank 0's, 1 mean, 2 min, 3 max.
    const ReduceOp combine[] = {ReduceOp::kSum, ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax};
    double combined = (o_.average == 0 && rank != 0) ? 0 : seconds;
    if (absl::Status s =
            comm_.AllReduce(&combined, &combined, 1, DataType::kFloat64, combine[o_.average])
                .Wait();
        !s.ok()) {
      return {s, 0, 0};
    }
    result.seconds = o_.average == 1 ? combined / p : combined;

    if (o_.check) {
      // Fresh inputs: the timed iterations have reduced in place many times over.
      for (size_t i = 0; i < count; ++i) {
        testing::Store(o_.type, testing::InputValue(o_.type, o_.op, rank, i), &send_[i * es]);
      }
      if (absl::Status s = issue().Wait(); !s.ok()) return {s, 0, 0};
      const auto* got = static_cast<const std::byte*>(out);
      std::byte want[8];
      int64_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        testing::StoreExpected(o_.type, o_.op, p, i, want);
        if (std::memcmp(want, got + i * es, es) != 0) ++wrong;
      }
      if (absl::Status s =
              comm_.AllReduce(&wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum).Wait();
          !s.ok()) {
        return {s, 0, 0};
      }
      result.wrong = wrong;
    }
    return result;
  }

  Communicator& comm_;
  const Options& o_;
  std::vector<std::byte> send_, recv_;
};

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  using namespace weft;
  bench::Options options;
  if (!bench::ParseOptions(argc, argv, &options)) return 2;
  if (options.timeout_s > 0) alarm(options.timeout_s);  // -T: the whole run is bounded
  CommOptions comm_options;
  comm_options.algorithm = options.algorithm;
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::CreateFromEnvironment(comm_options);
  if (!comm.ok()) {
    std::fprintf(stderr, "# error: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  bench::AllReducePerf perf(**comm, options);
  const int wrong = perf.Run();
  if (wrong != 0) {
    std::fflush(nullptr);
    _exit(1);
  }
  return 0;
}
