// One rank of a fault test, started by fault_test.cc (which hosts the rendezvous store and
// watches the processes). Prints "ERROR <message>" for each failed operation it was meant to see
// and exits 0 when the scenario went as designed, non-zero otherwise.
//
//   fault_worker SCENARIO RANK SIZE ID [ID2]
//
// kill      every rank loops large all-reduces; the last rank kills itself (SIGKILL) while its
//           third one runs. The others must fail, naming it.
// timeout   rank SIZE-1 skips the second all-reduce (it sleeps, alive); the others time out
//           (WEFT_TIMEOUT) and every rank dumps its flight recorder.
// mismatch  the last rank calls all_gather where the others call all_reduce: every rank fails,
//           and says how long after the issue (FAILED_AFTER_MS).
// abort     rank 0's operation is blocked (the others never join); another thread aborts it.
//           Then every rank builds a second communicator from ID2 and uses it.
// signal    a few all-reduces, then SIGUSR1 to itself: the flight recorder must appear on disk
//           (written by the fault watch thread); then a dump on request through the API.
// steady    200 all-reduces, every result checked (while the test attacks the ports); then, with
//           WEFT_STEADY_UNTIL=PATH, agreed rounds until PATH exists.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "time_scale.h"
#include "weft/comm/communicator.h"

namespace weft::testing {
namespace {

void ReportError(const absl::Status& status) {
  std::printf("ERROR %s\n", std::string(status.message()).c_str());
  std::fflush(stdout);
}

int Kill(Communicator& comm) {
  const int victim = comm.size() - 1;
  std::vector<float> data(size_t{8} << 20, 1.0f);  // 32 MiB: long enough to be killed inside
  for (int i = 0; i < 1000; ++i) {
    Work work =
        comm.AllReduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    if (comm.rank() == victim && i == 2) {
      // Let the progress thread and the peers get inside the operation, then die without a word.
      absl::SleepFor(absl::Milliseconds(20));
      raise(SIGKILL);
    }
    if (absl::Status s = work.Wait(); !s.ok()) {
      ReportError(s);
      return 0;
    }
  }
  std::printf("all-reduces kept succeeding without rank %d\n", victim);
  return 1;
}

int Timeout(Communicator& comm) {
  float value = 1.0f;
  if (absl::Status s = comm.AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum).Wait();
      !s.ok()) {
    ReportError(s);
    return 1;
  }
  if (comm.rank() == comm.size() - 1) {
    // Alive but late: long enough for the others' deadline to pass and their report to arrive.
    double timeout_s = 2;
    if (const char* text = std::getenv("WEFT_TIMEOUT")) (void)absl::SimpleAtod(text, &timeout_s);
    absl::SleepFor(absl::Seconds(timeout_s + 2));
    return 0;
  }
  absl::Status s = comm.AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum).Wait();
  if (s.ok()) return 1;
  ReportError(s);
  return 0;
}

// Waits for `work`, issued at `issued`, which must fail: reports the error and how long after
// the issue it came ("FAILED_AFTER_MS <n>"), which the test bounds. Creating the communicator
// is not counted: its bootstrap is not what the test bounds.
int ExpectFailure(Work& work, absl::Time issued) {
  absl::Status s = work.Wait();
  if (s.ok()) return 1;
  ReportError(s);
  std::printf("FAILED_AFTER_MS %lld\n",
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - issued)));
  std::fflush(stdout);
  return 0;
}

int Mismatch(Communicator& comm) {
  std::vector<float> data(4096 * comm.size(), 1.0f);
  const bool odd_one = comm.rank() == comm.size() - 1;
  const absl::Time issued = absl::Now();
  Work work =
      odd_one ? comm.AllGather(data.data(), data.data(), 1024, DataType::kFloat32)
              : comm.AllReduce(data.data(), data.data(), 4096, DataType::kFloat32, ReduceOp::kSum);
  return ExpectFailure(work, issued);
}

// The same with operations so small that the caller's thread runs them (the engine's eager path).
int MismatchTiny(Communicator& comm) {
  float value = 1.0f;
  const absl::Time issued = absl::Now();
  Work work = comm.rank() == comm.size() - 1
                  ? comm.Broadcast(&value, &value, 1, DataType::kFloat32, 0)
                  : comm.AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum);
  return ExpectFailure(work, issued);
}

int Abort(Communicator& comm, const std::string& second_id) {
  if (comm.rank() == 0) {
    float value = 1.0f;
    Work work = comm.AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum);
    absl::Time aborted_at;
    std::thread aborter([&] {
      absl::SleepFor(absl::Milliseconds(300));
      aborted_at = absl::Now();
      comm.Abort();
    });
    absl::Status s = work.Wait();
    const absl::Time returned_at = absl::Now();
    aborter.join();
    if (s.ok()) return 1;
    ReportError(s);
    std::printf("ABORT_RETURNED_MS %lld\n",
                static_cast<long long>(absl::ToInt64Milliseconds(returned_at - aborted_at)));
  }
  // Every process can still build and use a new communicator.
  absl::StatusOr<std::unique_ptr<Communicator>> fresh =
      Communicator::Create(second_id, comm.rank(), comm.size());
  if (!fresh.ok()) {
    ReportError(fresh.status());
    return 1;
  }
  float value = 1.0f;
  if (absl::Status s =
          (*fresh)->AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum).Wait();
      !s.ok() || value != static_cast<float>(comm.size())) {
    ReportError(s);
    return 1;
  }
  std::printf("SECOND_COMMUNICATOR_OK\n");
  return 0;
}

int Steady(Communicator& comm) {
  std::vector<float> data(1 << 14);
  // A fixed count: every rank must issue the same collectives.
  constexpr int kRounds = 200;
  int rounds = 0;
  while (rounds < kRounds) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(comm.rank() + i % 7);
    if (absl::Status s = comm.AllReduce(data.data(), data.data(), data.size(), DataType::kFloat32,
                                        ReduceOp::kSum)
                             .Wait();
        !s.ok()) {
      ReportError(s);
      return 1;
    }
    const int p = comm.size();
    for (size_t i = 0; i < data.size(); ++i) {
      if (data[i] != static_cast<float>(p * (p - 1) / 2 + p * static_cast<int>(i % 7))) {
        std::printf("WRONG element %zu of round %d: %f\n", i, rounds, data[i]);
        return 1;
      }
    }
    ++rounds;
  }
  // WEFT_STEADY_UNTIL=PATH: then keep the job running, in rounds the ranks agree on, until PATH
  // exists (the test's attacker creates it once it has attacked enough, however fast the job).
  if (const char* until = std::getenv("WEFT_STEADY_UNTIL"); until != nullptr) {
    for (;; ++rounds) {
      int64_t seen = access(until, F_OK) == 0 ? 1 : 0;
      if (absl::Status s = comm.AllReduce(&seen, &seen, 1, DataType::kInt64, ReduceOp::kMax).Wait();
          !s.ok()) {
        ReportError(s);
        return 1;
      }
      if (seen != 0) break;
      usleep(1000);
    }
  }
  std::printf("STEADY_OK %d rounds\n", rounds);
  return 0;
}

int Signal(Communicator& comm) {
  float value = 1.0f;
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s =
            comm.AllReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum).Wait();
        !s.ok()) {
      ReportError(s);
      return 1;
    }
  }
  const char* dir = std::getenv("WEFT_FLIGHT_RECORDER_DIR");
  if (dir == nullptr) return 2;
  const std::string path = absl::StrCat(dir, "/rank", comm.rank(), ".json");
  raise(SIGUSR1);
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(5));
  while (access(path.c_str(), R_OK) != 0) {
    if (absl::Now() > give_up) {
      std::printf("no dump at %s %d s after SIGUSR1\n", path.c_str(), 5 * TimeScale());
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::printf("SIGNAL_DUMP_OK\n");
  absl::StatusOr<std::string> requested = comm.DumpFlightRecorder("asked by the test");
  if (!requested.ok() || *requested != path) {
    std::printf(
        "DumpFlightRecorder: %s\n",
        requested.ok() ? requested->c_str() : std::string(requested.status().message()).c_str());
    return 1;
  }
  std::printf("API_DUMP_OK\n");
  return 0;
}

int Main(int argc, char** argv) {
  alarm(60);  // never outlive a broken test
  int rank = 0, size = 0;
  if (argc < 5 || !absl::SimpleAtoi(argv[2], &rank) || !absl::SimpleAtoi(argv[3], &size)) {
    std::fprintf(stderr, "usage: fault_worker SCENARIO RANK SIZE ID [ID2]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(argv[4], rank, size);
  if (!comm.ok()) {
    std::printf("CREATE_FAILED %s\n", std::string(comm.status().message()).c_str());
    return 3;
  }
  std::printf("PID %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  if (scenario == "kill") return Kill(**comm);
  if (scenario == "timeout") return Timeout(**comm);
  if (scenario == "mismatch") return Mismatch(**comm);
  if (scenario == "mismatch_tiny") return MismatchTiny(**comm);
  if (scenario == "steady") return Steady(**comm);
  if (scenario == "signal") return Signal(**comm);
  if (scenario == "abort" && argc >= 6) return Abort(**comm, argv[5]);
  std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
  return 2;
}

}  // namespace
}  // namespace weft::testing

int main(int argc, char** argv) { return weft::testing::Main(argc, argv); }
