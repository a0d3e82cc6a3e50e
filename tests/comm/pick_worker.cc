// One rank of the determinism check, started by weftrun from comm_test.cc: every collective at a
// sweep of sizes, each issued kCalls times, then the algorithm each operation carried as the
// flight recorder holds it. Within a rank every call of a (collective, size) must have run on the
// same algorithm, and every rank must have run every collective on the same one (compared by a
// hash of the whole sequence). Rank 0 prints the picks ("pick all_reduce 1024 shm_direct").
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "weft/comm/communicator.h"
#include "weft/kernels/hash.h"

namespace {

using weft::DataType;
using weft::ReduceOp;

constexpr int kCalls = 3;
constexpr size_t kMaxBytes = size_t{4} << 20;

// The value of `"key": VALUE` in a flight-recorder line, quotes stripped.
std::string Field(const std::string& line, const std::string& key) {
  const std::string start = absl::StrCat("\"", key, "\": ");
  size_t from = line.find(start);
  if (from == std::string::npos) return "";
  from += start.size();
  if (line[from] == '"') ++from;
  const size_t end = line.find_first_of("\",}", from);
  return line.substr(from, end - from);
}

int Run() {
  absl::StatusOr<std::unique_ptr<weft::Communicator>> created =
      weft::Communicator::CreateFromEnvironment();
  if (!created.ok()) {
    std::fprintf(stderr, "FAIL creating: %s\n", created.status().ToString().c_str());
    return 1;
  }
  weft::Communicator& comm = **created;
  const size_t n = comm.size();
  std::vector<float> in(kMaxBytes / sizeof(float) * n, 1.0f), out(in.size());
  for (size_t bytes = 4; bytes <= kMaxBytes; bytes *= 8) {
    const size_t count = bytes / sizeof(float);
    for (int call = 0; call < kCalls; ++call) {
      for (weft::Work work :
           {comm.AllReduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum),
            comm.ReduceScatter(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum),
            comm.AllGather(in.data(), out.data(), count, DataType::kFloat32),
            comm.Broadcast(in.data(), out.data(), count, DataType::kFloat32, 0),
            comm.Reduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, 0),
            comm.AllToAll(in.data(), out.data(), count, DataType::kFloat32), comm.Barrier()}) {
        if (absl::Status s = work.Wait(); !s.ok()) {
          std::fprintf(stderr, "FAIL %s\n", s.ToString().c_str());
          return 1;
        }
      }
    }
  }
  absl::StatusOr<std::string> path = comm.DumpFlightRecorder("pick check");
  if (!path.ok()) {
    std::fprintf(stderr, "FAIL dumping the flight recorder: %s\n",
                 path.status().ToString().c_str());
    return 1;
  }
  std::ifstream file(*path);
  std::map<std::pair<std::string, std::string>, std::string> picks;  // (op, bytes) -> algorithm
  std::string sequence;
  int failures = 0, operations = 0;
  for (std::string line; std::getline(file, line);) {
    if (!absl::StrContains(line, "\"collective\": true")) continue;
    ++operations;
    const std::pair<std::string, std::string> call{Field(line, "op"), Field(line, "bytes")};
    const std::string algorithm = Field(line, "algorithm");
    absl::StrAppend(&sequence, call.first, " ", call.second, " ", algorithm, "\n");
    auto [it, first] = picks.emplace(call, algorithm);
    if (!first && it->second != algorithm) {
      ++failures;
      std::fprintf(stderr, "FAIL rank %d: %s of %s bytes ran on %s and on %s\n", comm.rank(),
                   call.first.c_str(), call.second.c_str(), it->second.c_str(), algorithm.c_str());
    }
  }
  if (operations < 7 * kCalls) {
    std::fprintf(stderr, "FAIL rank %d: %d collectives in the flight recorder\n", comm.rank(),
                 operations);
    return 1;
  }
  const uint64_t hash = weft::Fnv1a(sequence);
  std::vector<uint64_t> hashes(comm.size());
  if (absl::Status s = comm.AllGather(&hash, hashes.data(), 1, DataType::kUint64).Wait(); !s.ok()) {
    std::fprintf(stderr, "FAIL all_gather: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int r = 0; r < comm.size(); ++r) {
    if (hashes[r] != hash) {
      ++failures;
      std::fprintf(stderr, "FAIL rank %d ran its collectives on other algorithms than rank %d\n", r,
                   comm.rank());
    }
  }
  if (comm.rank() == 0) {
    for (const auto& [call, algorithm] : picks) {
      std::printf("pick %s %s %s\n", call.first.c_str(), call.second.c_str(), algorithm.c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() { return Run(); }
