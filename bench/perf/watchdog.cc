#include "perf/watchdog.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace weft::perf {

Watchdog::Watchdog(int seconds, absl::Duration grace) : seconds_(seconds), grace_(grace) {
  if (seconds_ > 0) thread_ = std::thread([this] { Run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Watch(std::vector<Communicator*> comms) {
  std::lock_guard<std::mutex> lock(mu_);
  comms_ = std::move(comms);
  if (expired_) {
    for (Communicator* comm : comms_) comm->Abort();
  }
}

bool Watchdog::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

std::string Watchdog::Message() const {
  return absl::StrCat("the run exceeded -T ", seconds_, " s");
}

void Watchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds_);
  if (wake_.wait_until(lock, deadline, [this] { return stopping_; })) return;
  expired_ = true;
  for (Communicator* comm : comms_) comm->Abort();
  const auto last_call = deadline + absl::ToChronoNanoseconds(grace_);
  if (wake_.wait_until(lock, last_call, [this] { return stopping_; })) return;
  // The run did not notice the abort: it was not waiting on a communicator. Report and leave.
  // write(), not stdio: the stuck thread may hold stdout's lock. The tools print whole lines, so
  // no partial line precedes this one.
  const std::string line = absl::StrCat("# error: ", Message(), " and did not stop within ",
                                        absl::FormatDuration(grace_), " of the abort\n");
  (void)!write(STDOUT_FILENO, line.data(), line.size());
  _exit(kExitCode);
}

}  // namespace weft::perf
