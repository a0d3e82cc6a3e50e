// One rank of a tuner check, started by weftrun from hierarchy_test.cc: every rank must choose the
// same algorithm for every collective and size (they all price with rank 0's model), the tuner
// must explain each choice with a positive prediction, and WEFT_EXPECT_ALGO, when set, names the
// algorithm every all-reduce must use (to check that WEFT_ALGO overrides the tuner).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "weft/comm/communicator.h"
#include "weft/kernels/hash.h"

namespace {

constexpr const char* kCollectives[] = {"all_reduce", "reduce_scatter", "all_gather",
                                        "broadcast",  "reduce",         "all_to_all"};

int Run() {
  absl::StatusOr<std::unique_ptr<weft::Communicator>> created =
      weft::Communicator::CreateFromEnvironment();
  if (!created.ok()) {
    std::fprintf(stderr, "FAIL creating: %s\n", created.status().ToString().c_str());
    return 1;
  }
  weft::Communicator& comm = **created;
  const char* expect = std::getenv("WEFT_EXPECT_ALGO");
  int failures = 0;
  std::string choices;
  for (const char* collective : kCollectives) {
    for (size_t bytes = 8; bytes <= (size_t{256} << 20); bytes *= 4) {
      const std::string algorithm = comm.AlgorithmFor(collective, bytes);
      absl::StrAppend(&choices, algorithm, ";");
      const double predicted = comm.PredictedSeconds(collective, bytes);
      const std::string explained = comm.ExplainAlgorithm(collective, bytes);
      if (!(predicted > 0) || explained.find(algorithm) == std::string::npos) {
        ++failures;
        std::fprintf(stderr, "FAIL %s %zu bytes: %s predicted %g s, explained as '%s'\n",
                     collective, bytes, algorithm.c_str(), predicted, explained.c_str());
      }
      if (expect != nullptr && std::string(collective) == "all_reduce" && algorithm != expect) {
        ++failures;
        std::fprintf(stderr, "FAIL all_reduce %zu bytes: %s, WEFT_ALGO asked for %s\n", bytes,
                     algorithm.c_str(), expect);
      }
      if (comm.rank() == 0 && bytes == (size_t{2} << 20)) {
        std::printf("%s\n", explained.c_str());
      }
    }
  }
  // Every rank must have chosen alike: compare a hash of the choices across ranks.
  const uint64_t hash = weft::Fnv1a(choices);
  std::vector<uint64_t> hashes(comm.size());
  if (absl::Status s = comm.AllGather(&hash, hashes.data(), 1, weft::DataType::kUint64).Wait();
      !s.ok()) {
    std::fprintf(stderr, "FAIL all_gather: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int r = 0; r < comm.size(); ++r) {
    if (hashes[r] != hash) {
      ++failures;
      std::fprintf(stderr, "FAIL rank %d chose differently from rank %d\n", r, comm.rank());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() { return Run(); }
