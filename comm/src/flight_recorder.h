// FlightRecorder: the last operations of one communicator, kept so that a failure can be read
// after the fact.
//
// A ring of `capacity` records (WEFT_FLIGHT_RECORDER_SIZE, default 256; 0 turns it off), one per
// operation: what it was (collective, sequence number, type, count, bytes, root or peer,
// algorithm), when it was queued, started and ended, and how it ended. It is always on, so
// recording must cost next to nothing: a record is a handful of relaxed atomic stores guarded by
// a per-record sequence counter (a seqlock), with no lock and no allocation; only a failed
// operation's message takes a mutex. Start and end times are raw CPU timestamp counter reads
// (a few ns, where a clock_gettime costs tens), converted to wall-clock time when dumped.
//
// The records are dumped as versioned JSON (one file per rank and communicator, see Dump) when an
// operation fails or times out, when another rank reports a failure, on SIGUSR1 and on request
// (Communicator::DumpFlightRecorder). tools/weft-trace merges the files of all ranks. The format
// is documented in docs/TROUBLESHOOTING.md; readers must check "format" and "version".
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

inline constexpr int kFlightRecorderVersion = 1;

// What is known about an operation when it is queued. The names are static strings.
struct OpSummary {
  const char* name = "";       // "all_reduce", ..., "send", "recv", "group"
  const char* dtype = "";      // "" where it does not apply
  const char* reduce_op = "";  // likewise
  const char* algorithm = "";
  uint64_t seq = 0;  // collectives: the sequence number every rank shares; p2p: per-pair index
  uint64_t count = 0;
  uint64_t bytes = 0;
  int32_t root = -1;        // broadcast and reduce
  int32_t peer = -1;        // point-to-point
  bool collective = false;  // `seq` is comparable across ranks
};

// Who is recording: fills the header of every dump.
struct RecorderIdentity {
  int rank = 0;
  int size = 1;
  int64_t pid = 0;
  std::string host;
  std::string comm;  // the communicator's name within the job ("c0", "c0/split0c1")
  std::string path;  // where Dump writes
};

class FlightRecorder {
 public:
  enum class State : uint8_t { kQueued = 0, kRunning = 1, kDone = 2, kFailed = 3 };

  // `capacity` 0 records nothing and never dumps.
  explicit FlightRecorder(size_t capacity);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // WEFT_FLIGHT_RECORDER_SIZE, else 256.
  static size_t CapacityFromEnvironment();
  // The file for one rank of one communicator: WEFT_FLIGHT_RECORDER_DIR (else
  // /tmp/weft-flight-<hash of the job's name>) / rank<r>.json, or rank<r>.<comm>.json for every
  // communicator but the job's first.
  static std::string PathFor(absl::string_view job_name, absl::string_view comm, int rank);

  bool enabled() const { return capacity_ > 0; }

  // Set once, before the first operation.
  void SetIdentity(RecorderIdentity identity) { identity_ = std::move(identity); }
  const RecorderIdentity& identity() const { return identity_; }

  // Records a queued operation and returns its id (> 0; 0 when disabled). Callers serialize
  // Queued and QueuedAndStarted (the engine calls them under its submission lock); Started and
  // Finished may come from any thread, once each, after Queued returned.
  uint64_t Queued(const OpSummary& op) { return Append(op, State::kQueued, Ticks(), 0, 0); }
  // Operations run on their submitting thread, which are queued as they start: one that is
  // still running (since `start`, a Ticks() value), and one that succeeded between `start` and
  // now, recorded with a single update where Queued, Started and Finished would make three.
  uint64_t Running(const OpSummary& op, int64_t start) {
    return Append(op, State::kRunning, start, start, 0);
  }
  uint64_t Succeeded(const OpSummary& op, int64_t start) {
    return Append(op, State::kDone, start, start, Ticks());
  }
  // The recorder's clock: CPU timestamp counter ticks where there is one.
  static int64_t Ticks();
  void Started(uint64_t id);
  void Finished(uint64_t id, const absl::Status& status);

  // The records, oldest first, as the JSON document Dump writes. `reason` says why it was made.
  std::string ToJson(absl::string_view reason) const;

  // Writes ToJson(reason) to identity().path (atomically: a temporary file, then rename) and
  // returns the path. Thread-safe.
  absl::StatusOr<std::string> Dump(absl::string_view reason) const;

 private:
  struct Record {
    std::atomic<uint64_t> version{0};  // odd while being written
    std::atomic<uint64_t> id{0};       // 0: never used
    std::atomic<const char*> name{""};
    std::atomic<const char*> dtype{""};
    std::atomic<const char*> reduce_op{""};
    std::atomic<const char*> algorithm{""};
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<int32_t> root{-1};
    std::atomic<int32_t> peer{-1};
    std::atomic<bool> collective{false};
    std::atomic<uint8_t> state{0};
    std::atomic<int64_t> enqueue_ticks{0};
    std::atomic<int64_t> start_ticks{0};  // 0: not yet
    std::atomic<int64_t> end_ticks{0};
  };
  struct Snapshot;

  uint64_t Append(const OpSummary& op, State state, int64_t enqueue, int64_t start, int64_t end);

  Record* Slot(uint64_t id) const { return &records_[(id - 1) % capacity_]; }
  // Runs `write` on the record of `id` inside its seqlock, unless the slot was reused.
  template <typename Write>
  void Update(uint64_t id, Write write);
  bool Read(const Record& record, Snapshot* out) const;
  std::string ErrorOf(uint64_t id) const;

  // Ticks() to Unix nanoseconds, by the rate between this anchor (taken at construction) and
  // the time of the conversion.
  int64_t ToUnixNs(int64_t ticks, int64_t now_ticks, int64_t now_ns) const;

  const size_t capacity_;
  const int64_t anchor_ticks_;
  const int64_t anchor_ns_;
  std::unique_ptr<Record[]> records_;
  std::atomic<uint64_t> next_id_{0};
  RecorderIdentity identity_;

  // Messages of failed operations, newest last, at most kKeptErrors (failures are rare).
  static constexpr size_t kKeptErrors = 16;
  mutable std::mutex errors_mu_;
  std::deque<std::pair<uint64_t, std::string>> errors_;  // guarded by errors_mu_
  mutable std::mutex dump_mu_;                           // one Dump at a time
};

// SIGUSR1 asks every communicator of the process to dump its recorder. Installs the handler once
// per process, and only where SIGUSR1 still has its default action (an application's own
// handler is left alone). The handler only increments a counter (async-signal-safe); the
// communicators' fault watch threads notice the change and dump.
void InstallDumpSignal();
uint64_t DumpSignalCount();

}  // namespace weft
