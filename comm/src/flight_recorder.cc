#include "flight_recorder.h"

#include <fcntl.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "weft/comm/json.h"
#include "weft/kernels/hash.h"

namespace weft {
namespace {

constexpr size_t kDefaultCapacity = 256;
// A snapshot that keeps tearing (a writer busy on that very record) is skipped after this many
// tries: the dump must not wait on the engine.
constexpr int kReadAttempts = 64;

const char* StateName(uint8_t state) {
  switch (static_cast<FlightRecorder::State>(state)) {
    case FlightRecorder::State::kQueued:
      return "queued";
    case FlightRecorder::State::kRunning:
      return "running";
    case FlightRecorder::State::kDone:
      return "done";
    case FlightRecorder::State::kFailed:
      return "failed";
  }
  return "unknown";
}

// "c0/split0c1" -> "c0_split0c1": a communicator name as a file name component.
std::string FileComponent(absl::string_view comm) {
  std::string out(comm);
  for (char& c : out) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    if (!plain) c = '_';
  }
  return out;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path, int error) {
  return absl::UnavailableError(
      absl::StrCat("flight recorder: ", what, " ", path, ": ", std::strerror(error)));
}

absl::Status MakeDirectories(const std::string& dir) {
  for (size_t slash = 1; slash <= dir.size(); ++slash) {
    if (slash != dir.size() && dir[slash] != '/') continue;
    const std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError("creating directory", prefix, errno);
    }
  }
  return absl::OkStatus();
}

// The record's seqlock, without fences (ThreadSanitizer does not model them): a writer stores
// every field with release after marking the version odd, so a reader whose acquire load of a
// field sees a write in progress is bound to see the odd (or a newer) version when it reads the
// version again after its loads. Both are plain moves on x86.
constexpr auto kFieldStore = std::memory_order_release;
constexpr auto kFieldLoad = std::memory_order_acquire;

// A cheap monotonic tick: the CPU's timestamp counter where it has a constant rate (x86-64;
// Weft's targets have constant_tsc), else the monotonic clock in nanoseconds.
std::atomic<uint64_t> dump_signals{0};

void OnDumpSignal(int) { dump_signals.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

struct FlightRecorder::Snapshot {
  uint64_t id;
  const char* name;
  const char* dtype;
  const char* reduce_op;
  const char* algorithm;
  uint64_t seq, count, bytes;
  int32_t root, peer;
  bool collective;
  uint8_t state;
  int64_t enqueue_ticks, start_ticks, end_ticks;
};

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity),
      anchor_ticks_(Ticks()),
      anchor_ns_(absl::GetCurrentTimeNanos()),
      records_(capacity > 0 ? new Record[capacity] : nullptr) {}

int64_t FlightRecorder::ToUnixNs(int64_t ticks, int64_t now_ticks, int64_t now_ns) const {
  if (ticks == 0) return 0;
  const double span = static_cast<double>(now_ticks - anchor_ticks_);
  const double ns_per_tick = span > 0 ? static_cast<double>(now_ns - anchor_ns_) / span : 1.0;
  return anchor_ns_ +
         static_cast<int64_t>(static_cast<double>(ticks - anchor_ticks_) * ns_per_tick);
}

size_t FlightRecorder::CapacityFromEnvironment() {
  const char* text = std::getenv("WEFT_FLIGHT_RECORDER_SIZE");
  size_t capacity = 0;
  if (text == nullptr || !absl::SimpleAtoi(text, &capacity)) return kDefaultCapacity;
  return std::min<size_t>(capacity, size_t{1} << 20);
}

std::string FlightRecorder::PathFor(absl::string_view job_name, absl::string_view comm, int rank) {
  const char* dir = std::getenv("WEFT_FLIGHT_RECORDER_DIR");
  // The job's name holds part of its secret token: only a hash of it goes into a shared path.
  const std::string base = (dir != nullptr && *dir != '\0')
                               ? std::string(dir)
                               : absl::StrFormat("/tmp/weft-flight-%016x", Fnv1a(job_name));
  // A job's first communicator (from the environment or from a unique id) has the short name.
  if (comm == "c0" || comm == "u") return absl::StrCat(base, "/rank", rank, ".json");
  return absl::StrCat(base, "/rank", rank, ".", FileComponent(comm), ".json");
}

template <typename Write>
void FlightRecorder::Update(uint64_t id, Write write) {
  if (id == 0) return;
  Record& record = *Slot(id);
  if (record.id.load(std::memory_order_relaxed) != id) return;  // overwritten by a newer op
  const uint64_t v = record.version.load(std::memory_order_relaxed);
  record.version.store(v + 1, std::memory_order_relaxed);
  write(record);
  record.version.store(v + 2, std::memory_order_release);
}

int64_t FlightRecorder::Ticks() {
#if defined(__x86_64__)
  return static_cast<int64_t>(__rdtsc());
#else
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
#endif
}

uint64_t FlightRecorder::Append(const OpSummary& op, State state, int64_t enqueue, int64_t start,
                                int64_t end) {
  if (capacity_ == 0) return 0;
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed) + 1;
  Record& record = *Slot(id);
  const uint64_t v = record.version.load(std::memory_order_relaxed);
  record.version.store(v + 1, std::memory_order_relaxed);
  record.id.store(id, kFieldStore);
  record.name.store(op.name, kFieldStore);
  record.dtype.store(op.dtype, kFieldStore);
  record.reduce_op.store(op.reduce_op, kFieldStore);
  record.algorithm.store(op.algorithm, kFieldStore);
  record.seq.store(op.seq, kFieldStore);
  record.count.store(op.count, kFieldStore);
  record.bytes.store(op.bytes, kFieldStore);
  record.root.store(op.root, kFieldStore);
  record.peer.store(op.peer, kFieldStore);
  record.collective.store(op.collective, kFieldStore);
  record.state.store(static_cast<uint8_t>(state), kFieldStore);
  record.enqueue_ticks.store(enqueue, kFieldStore);
  record.start_ticks.store(start, kFieldStore);
  record.end_ticks.store(end, kFieldStore);
  record.version.store(v + 2, std::memory_order_release);
  return id;
}

void FlightRecorder::Started(uint64_t id) {
  if (id == 0) return;
  const int64_t now = Ticks();
  Update(id, [&](Record& r) {
    r.start_ticks.store(now, kFieldStore);
    r.state.store(static_cast<uint8_t>(State::kRunning), kFieldStore);
  });
}

void FlightRecorder::Finished(uint64_t id, const absl::Status& status) {
  if (id == 0) return;
  const int64_t now = Ticks();
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(errors_mu_);
    errors_.emplace_back(id, std::string(status.message()));
    if (errors_.size() > kKeptErrors) errors_.pop_front();
  }
  Update(id, [&](Record& r) {
    // An operation failed before it started (sticky error, abort) still gets a start time.
    if (r.start_ticks.load(std::memory_order_relaxed) == 0) {
      r.start_ticks.store(now, kFieldStore);
    }
    r.end_ticks.store(now, kFieldStore);
    r.state.store(static_cast<uint8_t>(status.ok() ? State::kDone : State::kFailed), kFieldStore);
  });
}

bool FlightRecorder::Read(const Record& record, Snapshot* out) const {
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint64_t before = record.version.load(std::memory_order_acquire);
    if (before % 2 != 0) continue;
    out->id = record.id.load(kFieldLoad);
    out->name = record.name.load(kFieldLoad);
    out->dtype = record.dtype.load(kFieldLoad);
    out->reduce_op = record.reduce_op.load(kFieldLoad);
    out->algorithm = record.algorithm.load(kFieldLoad);
    out->seq = record.seq.load(kFieldLoad);
    out->count = record.count.load(kFieldLoad);
    out->bytes = record.bytes.load(kFieldLoad);
    out->root = record.root.load(kFieldLoad);
    out->peer = record.peer.load(kFieldLoad);
    out->collective = record.collective.load(kFieldLoad);
    out->state = record.state.load(kFieldLoad);
    out->enqueue_ticks = record.enqueue_ticks.load(kFieldLoad);
    out->start_ticks = record.start_ticks.load(kFieldLoad);
    out->end_ticks = record.end_ticks.load(kFieldLoad);
    if (record.version.load(std::memory_order_relaxed) == before) return out->id != 0;
  }
  return false;
}

std::string FlightRecorder::ErrorOf(uint64_t id) const {
  std::lock_guard<std::mutex> lock(errors_mu_);
  for (const auto& [error_id, message] : errors_) {
    if (error_id == id) return message;
  }
  return "";
}

std::string FlightRecorder::ToJson(absl::string_view reason) const {
  std::vector<Snapshot> ops;
  ops.reserve(capacity_);
  for (size_t i = 0; i < capacity_; ++i) {
    Snapshot s;
    if (Read(records_[i], &s)) ops.push_back(s);
  }
  std::sort(ops.begin(), ops.end(),
            [](const Snapshot& a, const Snapshot& b) { return a.id < b.id; });
  const int64_t now_ticks = Ticks();
  const int64_t now_ns = absl::GetCurrentTimeNanos();
  std::string out = absl::StrFormat(
      "{\n  \"format\": \"weft-flight-recorder\",\n  \"version\": %d,\n  \"rank\": %d,\n"
      "  \"size\": %d,\n  \"pid\": %d,\n  \"host\": %s,\n  \"comm\": %s,\n  \"reason\": %s,\n"
      "  \"dumped_ns\": %d,\n  \"capacity\": %d,\n  \"ops\": [",
      kFlightRecorderVersion, identity_.rank, identity_.size, identity_.pid,
      JsonQuote(identity_.host), JsonQuote(identity_.comm), JsonQuote(reason), now_ns, capacity_);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Snapshot& s = ops[i];
    absl::StrAppendFormat(
        &out,
        "%s\n    {\"id\": %d, \"seq\": %d, \"collective\": %s, \"op\": %s, \"dtype\": %s, "
        "\"reduce_op\": %s, \"count\": %d, \"bytes\": %d, \"root\": %d, \"peer\": %d, "
        "\"algorithm\": %s, \"state\": \"%s\", \"enqueue_ns\": %d, \"start_ns\": %d, "
        "\"end_ns\": %d",
        i == 0 ? "" : ",", s.id, s.seq, s.collective ? "true" : "false", JsonQuote(s.name),
        JsonQuote(s.dtype), JsonQuote(s.reduce_op), s.count, s.bytes, s.root, s.peer,
        JsonQuote(s.algorithm), StateName(s.state), ToUnixNs(s.enqueue_ticks, now_ticks, now_ns),
        ToUnixNs(s.start_ticks, now_ticks, now_ns), ToUnixNs(s.end_ticks, now_ticks, now_ns));
    if (s.state == static_cast<uint8_t>(State::kFailed)) {
      absl::StrAppend(&out, ", \"error\": ", JsonQuote(ErrorOf(s.id)));
    }
    out += "}";
  }
  out += ops.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

absl::StatusOr<std::string> FlightRecorder::Dump(absl::string_view reason) const {
  if (capacity_ == 0) {
    return absl::FailedPreconditionError("flight recorder is off (WEFT_FLIGHT_RECORDER_SIZE=0)");
  }
  std::lock_guard<std::mutex> lock(dump_mu_);
  const std::string& path = identity_.path;
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status s = MakeDirectories(path.substr(0, slash)); !s.ok()) return s;
  }
  const std::string text = ToJson(reason);
  const std::string temporary = absl::StrCat(path, ".tmp", identity_.pid);
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("creating", temporary, errno);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      unlink(temporary.c_str());
      return ErrnoError("writing", temporary, error);
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return ErrnoError("renaming to", path, error);
  }
  return path;
}

void InstallDumpSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
    const bool is_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
    if (!is_default) return;
    struct sigaction action {};
    action.sa_handler = OnDumpSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
  });
}

uint64_t DumpSignalCount() { return dump_signals.load(std::memory_order_relaxed); }

}  // namespace weft
