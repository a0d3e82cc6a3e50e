#include "fault_watch.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flight_recorder.h"
#include "log.h"
#include "rank_list.h"
#include "transport/shm/process_watch.h"
#include "weft/topology/host.h"

namespace weft {
namespace {

// One parked Get: short enough that SIGUSR1 is answered promptly (the store client itself
// re-parks in rounds of kStoreGetRoundMs).
constexpr absl::Duration kWatchRound = absl::Milliseconds(250);

// Where each rank publishes what it called as operation #seq: the prefix of "call/<seq>/<rank>".
std::string CallKey(uint64_t seq) { return absl::StrCat("call/", seq, "/"); }

}  // namespace

std::string FormatRankProcess(const RankProcess& process) {
  return absl::StrCat(process.pid, "\t",
                      process.pid_namespace.empty() ? "-" : process.pid_namespace, "\t",
                      process.host_id, "\t", process.host);
}

absl::StatusOr<RankProcess> ParseRankProcess(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '\t');
  RankProcess process;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &process.pid) || process.pid <= 0) {
    return absl::DataLossError(absl::StrCat("unreadable process record '", absl::CHexEscape(text),
                                            "' (ranks running different Weft builds?)"));
  }
  if (parts[1] != "-") process.pid_namespace = std::string(parts[1]);
  process.host_id = std::string(parts[2]);
  process.host = std::string(parts[3]);
  return process;
}

FaultWatch::FaultWatch(std::shared_ptr<Store> store, std::shared_ptr<Store> watch_store, int rank,
                       std::vector<RankProcess> processes, Callbacks callbacks)
    : store_(std::move(store)),
      watch_store_(std::move(watch_store)),
      rank_(rank),
      processes_(std::move(processes)),
      callbacks_(std::move(callbacks)),
      own_pid_namespace_(PidNamespaceId()),
      own_host_id_(HostIdentity()) {}

absl::StatusOr<std::unique_ptr<FaultWatch>> FaultWatch::Start(std::shared_ptr<Store> store,
                                                              std::shared_ptr<Store> watch_store,
                                                              int rank, int size,
                                                              const Deadline& deadline,
                                                              Callbacks callbacks) {
  RankProcess self;
  self.pid = getpid();
  self.pid_namespace = PidNamespaceId();
  self.host_id = HostIdentity();
  self.host = HostName();
  absl::StatusOr<std::vector<std::string>> entries =
      StoreAllGather(*store, "process", rank, size, FormatRankProcess(self), deadline);
  if (!entries.ok()) return entries.status();
  std::vector<RankProcess> processes;
  processes.reserve(size);
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<RankProcess> parsed = ParseRankProcess((*entries)[r]);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat("rank ", r, ": ", parsed.status().message()));
    }
    processes.push_back(*std::move(parsed));
  }
  InstallDumpSignal();
  std::unique_ptr<FaultWatch> watch(new FaultWatch(std::move(store), std::move(watch_store), rank,
                                                   std::move(processes), std::move(callbacks)));
  // Counted here, not when the thread gets going: a SIGUSR1 raised in between must still dump.
  const uint64_t signals_seen = DumpSignalCount();
  watch->thread_ = std::thread([raw = watch.get(), signals_seen] { raw->Loop(signals_seen); });
  return watch;
}

FaultWatch::~FaultWatch() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  // Any request on the watch's connection ends its parked Get round at once; the Get then sees
  // `stopping_` (its deadline's abort flag) and returns.
  (void)watch_store_->Add("fault-watch-wake", 0);
  if (thread_.joinable()) thread_.join();
}

void FaultWatch::Loop(uint64_t signals_seen) {
  const std::string key = absl::StrCat("fault/", rank_);
  bool listening = true;  // until a report arrived or the store became unreachable
  while (!stopping_.load()) {
    if (listening) {
      absl::StatusOr<std::string> report =
          watch_store_->Get(key, Deadline::In(kWatchRound, &stopping_));
      if (report.ok()) {
        listening = false;
        if (!stopping_.load()) callbacks_.on_fault(*report);
      } else if (report.status().code() != absl::StatusCode::kDeadlineExceeded &&
                 report.status().code() != absl::StatusCode::kCancelled) {
        listening = false;
        if (DebugEnabled(DebugLevel::kWarn)) {
          DebugLog(DebugLevel::kWarn,
                   absl::StrCat("rank ", rank_,
                                ": fault watch: the store is unreachable, so failures of other "
                                "ranks will be seen only on this rank's own links: ",
                                report.status().message()));
        }
      }
    } else {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, absl::ToChronoNanoseconds(kWatchRound),
                     [this] { return stopping_.load(); });
    }
    if (const uint64_t signals = DumpSignalCount(); signals != signals_seen) {
      signals_seen = signals;
      if (!stopping_.load()) callbacks_.on_dump_signal();
    }
  }
}

void FaultWatch::Publish(absl::string_view report) {
  if (published_.exchange(true)) return;
  for (int r = 0; r < static_cast<int>(processes_.size()); ++r) {
    if (r == rank_) continue;
    if (absl::Status s = store_->Set(absl::StrCat("fault/", r), report); !s.ok()) {
      if (DebugEnabled(DebugLevel::kWarn)) {
        DebugLog(DebugLevel::kWarn,
                 absl::StrCat("rank ", rank_, ": could not report the failure to rank ", r,
                              " through the store: ", s.message()));
      }
      return;  // the store is gone: the other ranks will not hear from it either
    }
  }
}

void FaultWatch::PublishCall(uint64_t seq, const std::string& call) const {
  // Best effort: a store that is gone leaves the peers with "did not say".
  (void)store_->Set(absl::StrCat(CallKey(seq), rank_), call);
}

std::string FaultWatch::CompareCalls(uint64_t seq, const std::string& call,
                                     absl::Duration wait) const {
  const std::string key = CallKey(seq);
  if (!store_->Set(absl::StrCat(key, rank_), call).ok()) return "";
  const Deadline deadline = Deadline::In(wait);
  std::map<std::string, std::vector<int64_t>> calls;  // what was called -> by whom
  for (int r = 0; r < static_cast<int>(processes_.size()); ++r) {
    absl::StatusOr<std::string> theirs = r == rank_ ? absl::StatusOr<std::string>(call)
                                                    : store_->Get(absl::StrCat(key, r), deadline);
    calls[theirs.ok() ? *theirs : ""].push_back(r);
  }
  if (calls.size() == 1 && calls.begin()->first == call) return "";
  // Fewest callers first: the odd one out leads, as in "rank 3 called X as op #57, ranks 0-2
  // called Y".
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups(calls.begin(), calls.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.first.empty() == b.first.empty() ? a.second.size() < b.second.size() : b.first.empty();
  });
  std::vector<std::string> parts;
  for (const auto& [what, ranks] : groups) {
    parts.push_back(what.empty()
                        ? absl::StrCat(RankList(ranks), " did not say (not in the operation?)")
                        : absl::StrCat(RankList(ranks), " called ", what,
                                       parts.empty() ? absl::StrCat(" as op #", seq) : ""));
  }
  return absl::StrJoin(parts, ", ");
}

std::string FaultWatch::PendingReport() const {
  absl::StatusOr<std::string> report =
      store_->Get(absl::StrCat("fault/", rank_), Deadline::In(absl::ZeroDuration()));
  return report.ok() ? *report : "";
}

std::string FaultWatch::Describe(int r) const {
  if (r < 0 || r >= static_cast<int>(processes_.size())) return "unknown process";
  const RankProcess& p = processes_[r];
  return absl::StrCat("pid ", p.pid, " on host ", p.host);
}

std::string FaultWatch::ExitedRanks() const {
  if (own_pid_namespace_.empty()) return "";
  std::vector<std::string> exited;
  for (int r = 0; r < static_cast<int>(processes_.size()); ++r) {
    const RankProcess& p = processes_[r];
    if (r == rank_ || p.host_id != own_host_id_ || p.pid_namespace != own_pid_namespace_) continue;
    if (ProcessWatch::Open(static_cast<pid_t>(p.pid)).Exited()) {
      exited.push_back(absl::StrCat("rank ", r, " (", Describe(r), ")"));
    }
  }
  return absl::StrJoin(exited, ", ");
}

}  // namespace weft
