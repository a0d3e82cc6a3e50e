#include "transport/shm/arena.h"

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backoff.h"
#include "transport/shm/futex.h"

namespace weft {
namespace {

constexpr uint64_t kArenaMagic = 0x57454654'4152454eull;  // "WEFTAREN"
constexpr uint32_t kArenaVersion = 3;
constexpr size_t kPageBytes = 4096;

// A waiter first spins (a publisher on another core answers within a cache-line transfer, well
// under a microsecond), then yields (oversubscribed ranks hand the core to the publisher), then
// sleeps on the futex. Oversubscribed, the yields last a few tens of microseconds; with a core
// per rank they go on for a millisecond, because waking a sleeper costs far more than a yield
// that finds nothing else to run: in a VM the sleeper's virtual CPU halts.
constexpr int kSpinRounds = 256;
constexpr int kYieldRounds = 64;
constexpr int64_t kYieldWithOwnCoreNs = 1'000'000;
// Futex sleeps are this short so the deadline, the abort flag and the publisher's liveness are
// looked at often; a Publish wakes the sleeper at once regardless.
constexpr int64_t kMaxSleepUs = 10'000;

struct ArenaHeader {
  std::atomic<uint64_t> magic;  // stored last by the creator (release)
  uint32_t version;
  int32_t local_size;
  uint64_t area_bytes;
  uint64_t counters_offset;
  uint64_t areas_offset;
  uint64_t total_bytes;
};

// Each rank fills its own entry when it maps the arena, so peers can watch it for exit.
struct RankEntry {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> reserved;
  std::atomic<uint64_t> pid_namespace;  // Fnv1a(PidNamespaceId()), 0 when unknown
  std::atomic<uint64_t> probe_address;  // where kRemoteReadProbe lives in this rank's memory
};

// Peers read this word out of our address space to find out whether cross-memory attach works.
const uint64_t kRemoteReadProbe = 0x57454654'50524f42ull;  // "WEFTPROB"

// Whether this process may read local rank `r`'s memory with process_vm_readv: same user or
// ptrace permission, a kernel with cross-memory attach, no seccomp filter in the way.
bool CanReadRemote(const RankEntry& entry) {
  uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void*>(entry.probe_address.load(std::memory_order_acquire)),
               sizeof(value)};
  return process_vm_readv(entry.pid.load(std::memory_order_acquire), &local, 1, &remote, 1, 0) ==
             sizeof(value) &&
         value == kRemoteReadProbe;
}

constexpr size_t RoundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

// What a rank publishes about its part of the setup: "" for success, else the error.
std::string Outcome(const absl::Status& status) { return status.ok() ? "" : status.ToString(); }

RankEntry* Entries(std::byte* base) {
  return reinterpret_cast<RankEntry*>(base + RoundUp(sizeof(ArenaHeader), 64));
}

absl::Status Validate(const ShmSegment& segment, const ArenaHeader& header, int local_size,
                      size_t area_bytes, size_t total_bytes) {
  if (segment.size() < sizeof(ArenaHeader) ||
      header.magic.load(std::memory_order_acquire) != kArenaMagic ||
      header.version != kArenaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared-memory arena ", segment.name(), " is not a Weft arena of version ",
                     kArenaVersion, " (a different Weft build on another rank?)"));
  }
  if (header.local_size != local_size || header.area_bytes != area_bytes ||
      header.total_bytes != total_bytes || segment.size() != total_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory arena ", segment.name(), " was created for ", header.local_size,
        " local ranks with ", header.area_bytes, "-byte areas, but this rank expects ", local_size,
        " ranks with ", area_bytes, "-byte areas (ranks disagree on the communicator layout)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmArena>> ShmArena::Create(Store& store,
                                                           const std::string& unique_name, int rank,
                                                           const std::vector<int>& local_ranks,
                                                           size_t area_bytes, bool oversubscribed,
                                                           const Deadline& deadline) {
  const auto me = std::find(local_ranks.begin(), local_ranks.end(), rank);
  if (me == local_ranks.end() || !std::is_sorted(local_ranks.begin(), local_ranks.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory arena: rank ", rank,
                     " must appear in the ascending list of local ranks it was given"));
  }
  std::unique_ptr<ShmArena> arena(new ShmArena());
  arena->local_ranks_ = local_ranks;
  arena->local_rank_ = static_cast<int>(me - local_ranks.begin());
  arena->local_size_ = static_cast<int>(local_ranks.size());
  arena->oversubscribed_ = oversubscribed;
  arena->area_bytes_ = RoundUp(std::max<size_t>(area_bytes, 1), kPageBytes);
  const int local_size = arena->local_size_;
  arena->counters_offset_ =
      RoundUp(RoundUp(sizeof(ArenaHeader), 64) + sizeof(RankEntry) * local_size, 64);
  arena->areas_offset_ = RoundUp(
      arena->counters_offset_ + sizeof(CounterLine) * kCountersPerRank * local_size, kPageBytes);
  const size_t total_bytes = arena->areas_offset_ + arena->area_bytes_ * local_size;

  const std::string name = ShmObjectName(unique_name, "arena");
  const std::string key = absl::StrFormat("shm_arena/%016x", Fnv1a(unique_name));
  const std::string who =
      absl::StrCat("rank ", rank, " (local rank ", arena->local_rank_, " of ", local_size, ")");

  // The creator publishes its outcome either way, so attachers fail at once with its reason
  // instead of waiting for their deadline.
  absl::Status status;
  if (arena->local_rank_ == 0) {
    absl::StatusOr<ShmSegment> segment = ShmSegment::Create(name, total_bytes);
    if (segment.ok()) {
      arena->segment_ = *std::move(segment);
      std::byte* base = arena->segment_.data();
      auto* header = new (base) ArenaHeader();
      header->version = kArenaVersion;
      header->local_size = local_size;
      header->area_bytes = arena->area_bytes_;
      header->counters_offset = arena->counters_offset_;
      header->areas_offset = arena->areas_offset_;
      header->total_bytes = total_bytes;
      new (Entries(base)) RankEntry[local_size]();
      new (base + arena->counters_offset_) CounterLine[kCountersPerRank * local_size]();
      header->magic.store(kArenaMagic, std::memory_order_release);
    } else {
      status = segment.status();
    }
    if (absl::Status s = store.Set(absl::StrCat(key, "/created"), Outcome(status));
        !s.ok() && status.ok()) {
      status = s;
    }
  } else {
    absl::StatusOr<std::string> created = store.Get(absl::StrCat(key, "/created"), deadline);
    if (!created.ok()) {
      status = created.status();
    } else if (!created->empty()) {
      status = absl::UnavailableError(
          absl::StrCat("rank ", local_ranks[0], " could not create the arena: ", *created));
    } else {
      absl::StatusOr<ShmSegment> segment = ShmSegment::Open(name);
      if (segment.ok()) {
        arena->segment_ = *std::move(segment);
        status = Validate(arena->segment_,
                          *std::launder(reinterpret_cast<ArenaHeader*>(arena->segment_.data())),
                          local_size, arena->area_bytes_, total_bytes);
      } else {
        status = segment.status();
      }
    }
  }
  const std::string pid_namespace = PidNamespaceId();
  if (status.ok()) {
    RankEntry& entry = Entries(arena->segment_.data())[arena->local_rank_];
    entry.pid.store(getpid(), std::memory_order_release);
    entry.pid_namespace.store(Fnv1a(pid_namespace), std::memory_order_release);
    entry.probe_address.store(reinterpret_cast<uint64_t>(&kRemoteReadProbe),
                              std::memory_order_release);
  }

  // Everyone reports whether it attached; only then may the name go, and every rank learns every
  // other rank's pid.
  if (absl::Status s =
          store.Set(absl::StrCat(key, "/attached/", arena->local_rank_), Outcome(status));
      !s.ok() && status.ok()) {
    status = s;
  }
  for (int r = 0; r < local_size && status.ok(); ++r) {
    absl::StatusOr<std::string> attached = store.Get(absl::StrCat(key, "/attached/", r), deadline);
    if (!attached.ok()) {
      status = absl::Status(attached.status().code(),
                            absl::StrCat("waiting for rank ", local_ranks[r],
                                         " to attach: ", attached.status().message()));
    } else if (!attached->empty() && r != arena->local_rank_) {
      status = absl::UnavailableError(
          absl::StrCat("rank ", local_ranks[r], " could not attach: ", *attached));
    }
  }
  arena->segment_.Unlink();
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(who, ": shared-memory arena ", name, ": ", status.message()));
  }

  // Pids mean something only inside one pid namespace: ranks elsewhere are not watched.
  arena->watches_.resize(local_size);
  for (int r = 0; r < local_size; ++r) {
    const RankEntry& entry = Entries(arena->segment_.data())[r];
    if (r == arena->local_rank_ || pid_namespace.empty() ||
        entry.pid_namespace.load(std::memory_order_acquire) != Fnv1a(pid_namespace)) {
      continue;
    }
    arena->watches_[r] = ProcessWatch::Open(entry.pid.load(std::memory_order_acquire));
  }
  arena->pids_.resize(local_size);
  for (int r = 0; r < local_size; ++r) {
    arena->pids_[r] = Entries(arena->segment_.data())[r].pid.load(std::memory_order_acquire);
  }
  if (absl::Status s = arena->AgreeOnRemoteReads(store, key, deadline); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(who, ": shared-memory arena ", name, ": ", s.message()));
  }
  return arena;
}

absl::Status ShmArena::AgreeOnRemoteReads(Store& store, const std::string& key,
                                          const Deadline& deadline) {
  // Every rank must make the same choice of algorithm, so remote reads are used only when every
  // rank can read every other: each publishes what it found and all take the conjunction.
  bool mine = true;
  for (int r = 0; r < local_size_ && mine; ++r) {
    if (r != local_rank_) mine = CanReadRemote(Entries(segment_.data())[r]);
  }
  if (absl::Status s = store.Set(absl::StrCat(key, "/remote_read/", local_rank_), mine ? "1" : "0");
      !s.ok()) {
    return s;
  }
  remote_read_ = true;
  for (int r = 0; r < local_size_; ++r) {
    absl::StatusOr<std::string> theirs = store.Get(absl::StrCat(key, "/remote_read/", r), deadline);
    if (!theirs.ok()) return theirs.status();
    remote_read_ = remote_read_ && *theirs == "1";
  }
  return absl::OkStatus();
}

ShmArena::CounterLine* ShmArena::counter(int r, int index) const {
  return std::launder(reinterpret_cast<CounterLine*>(segment_.data() + counters_offset_)) +
         r * kCountersPerRank + index;
}

std::byte* ShmArena::area(int r) const {
  return segment_.data() + areas_offset_ + area_bytes_ * static_cast<size_t>(r);
}

void ShmArena::Publish(int index, uint64_t value) {
  CounterLine* line = counter(local_rank_, index);
  // seq_cst on both sides of the value/waiters handshake: either this load sees the waiter's
  // registration, or the waiter's re-check after registering sees this value (see WaitAtLeast).
  line->value.store(value, std::memory_order_seq_cst);
  if (line->waiters.load(std::memory_order_seq_cst) > 0) {
    line->futex_word.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&line->futex_word);
  }
}

void ShmArena::PublishWith(int index, uint64_t value, const void* data, size_t bytes) {
  std::memcpy(counter(local_rank_, index)->payload, data, bytes);
  Publish(index, value);
}

const std::byte* ShmArena::Payload(int r, int index) const { return counter(r, index)->payload; }

uint64_t ShmArena::Read(int r, int index) const {
  return counter(r, index)->value.load(std::memory_order_acquire);
}

absl::Status ShmArena::WaitAtLeast(int r, int index, uint64_t value,
                                   const Deadline& deadline) const {
  CounterLine* line = counter(r, index);
  auto reached = [&] { return line->value.load(std::memory_order_acquire) >= value; };
  if (reached()) return absl::OkStatus();
  for (int i = 0; i < kSpinRounds; ++i) {
    CpuRelax();
    if (reached()) return absl::OkStatus();
  }
  for (int i = 0; i < kYieldRounds; ++i) {
    sched_yield();
    if (reached()) return absl::OkStatus();
  }
  int64_t last_check_ns = CoarseMonotonicNs();
  if (!oversubscribed_) {
    while (CoarseMonotonicNs() - last_check_ns < kYieldWithOwnCoreNs && !deadline.Aborted()) {
      sched_yield();
      if (reached()) return absl::OkStatus();
    }
  }
  while (true) {
    if (deadline.Aborted() || deadline.Expired()) {
      return deadline.Check(absl::StrCat(
          "rank ", local_ranks_[local_rank_], ": shared-memory arena: waiting for rank ",
          local_ranks_[r], " to publish ", value, " on counter ", index, " (it is at ",
          line->value.load(std::memory_order_acquire), ")"));
    }
    if (const int64_t now = CoarseMonotonicNs(); now - last_check_ns >= kProcessCheckIntervalNs) {
      last_check_ns = now;
      if (watches_[r].Exited()) {
        return absl::UnavailableError(absl::StrCat(
            "rank ", local_ranks_[local_rank_], ": shared-memory arena: rank ", local_ranks_[r],
            " (pid ", watches_[r].pid(), ") exited while this rank waited for it to publish ",
            value, " on counter ", index));
      }
    }
    // Registration protocol (pairs with Publish): read the futex word, announce ourselves, then
    // re-check the value. A Publish that missed our announcement stored its value before we
    // re-checked; one that saw it changes the futex word, so the wait below returns at once.
    const uint32_t seen = line->futex_word.load(std::memory_order_seq_cst);
    line->waiters.fetch_add(1, std::memory_order_seq_cst);
    if (line->value.load(std::memory_order_seq_cst) >= value) {
      line->waiters.fetch_sub(1, std::memory_order_seq_cst);
      return absl::OkStatus();
    }
    const int64_t left_us = absl::ToInt64Microseconds(deadline.Remaining());
    FutexWait(&line->futex_word, seen, std::clamp<int64_t>(left_us, 1, kMaxSleepUs));
    line->waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (reached()) return absl::OkStatus();
  }
}

}  // namespace weft
