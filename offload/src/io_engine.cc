#include "weft/offload/io_engine.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engines.h"
#include "weft/offload/aligned_buffer.h"

namespace weft::offload {
namespace {

std::string Describe(const IoRequest& r) {
  return absl::StrCat(IoOpName(r.op), " of ", r.bytes, " bytes at offset ", r.offset, " of ",
                      r.file == nullptr ? std::string("<no file>") : r.file->path());
}

absl::Status CheckRequest(const IoRequest& r) {
  const auto misaligned = [](uint64_t v) { return v % kIoAlignment != 0; };
  if (r.file == nullptr || r.buffer == nullptr || r.bytes == 0 || misaligned(r.offset) ||
      misaligned(r.bytes) || misaligned(reinterpret_cast<uintptr_t>(r.buffer))) {
    return absl::InvalidArgumentError(
        absl::StrCat("io request ", Describe(r), ": needs a file, a buffer, and buffer, offset ",
                     "and length that are non-zero multiples of ", kIoAlignment));
  }
  return absl::OkStatus();
}

// The status of a finished request that moved `value` bytes (or failed with -value).
absl::Status Outcome(const IoRequest& r, int64_t value) {
  if (value < 0) {
    const int code = static_cast<int>(-value);
    const std::string message = absl::StrCat(Describe(r), ": ", std::strerror(code));
    return code == ENOSPC ? absl::ResourceExhaustedError(message) : absl::InternalError(message);
  }
  if (static_cast<size_t>(value) == r.bytes) return absl::OkStatus();
  const std::string message = absl::StrCat("short ", Describe(r), ": moved ", value, " bytes");
  return r.op == IoOp::kRead ? absl::DataLossError(message) : absl::InternalError(message);
}

}  // namespace

absl::string_view IoOpName(IoOp op) { return op == IoOp::kRead ? "read" : "write"; }

absl::Status IoEngine::Submit(absl::Span<const IoRequest> batch) {
  for (const IoRequest& r : batch) {
    if (absl::Status s = CheckRequest(r); !s.ok()) return s;
  }
  for (const IoRequest& r : batch) {
    const uint64_t seq = next_seq_++;
    outstanding_.emplace(seq, r);
    if (absl::Status s = Start(seq, r); !s.ok()) {
      outstanding_.erase(seq);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status IoEngine::Reap(absl::Duration timeout, std::vector<IoCompletion>* done) {
  if (outstanding_.empty()) return absl::OkStatus();
  std::vector<Result> results;
  if (absl::Status s = Collect(absl::Now() + timeout, &results); !s.ok()) return s;
  if (results.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        name(), " engine: no completion within ", absl::FormatDuration(timeout), "; waiting on ",
        Describe(outstanding_.begin()->second), " (", outstanding_.size(), " outstanding)"));
  }
  for (const Result& result : results) {
    const auto it = outstanding_.find(result.seq);
    if (it == outstanding_.end()) {
      return absl::InternalError(
          absl::StrCat(name(), " engine: completion of unknown request ", result.seq));
    }
    const IoRequest& r = it->second;
    done->push_back({r.tag, r.op, r.bytes, Outcome(r, result.value)});
    outstanding_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IoEngine>> MakeIoEngine(const IoEngineOptions& options) {
  if (options.queue_depth < 1 || options.queue_depth > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("io queue depth ", options.queue_depth, " is outside [1, 64]"));
  }
  IoEngineKind kind = options.kind;
  std::string why;
  if (kind == IoEngineKind::kAuto) {
    const char* env = std::getenv("WEFT_OFFLOAD_IO");
    const std::string forced = env == nullptr ? "" : env;
    if (forced == "threads") {
      kind = IoEngineKind::kThreads;
      why = "forced by WEFT_OFFLOAD_IO=threads";
    } else if (forced == "io_uring") {
      kind = IoEngineKind::kIoUring;
    } else if (!forced.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("WEFT_OFFLOAD_IO=", forced, " is neither 'io_uring' nor 'threads'"));
    }
  } else if (kind == IoEngineKind::kThreads) {
    why = "forced by option";
  }
  if (kind == IoEngineKind::kThreads) return internal::MakeThreadEngine(options.queue_depth, why);
  absl::StatusOr<std::unique_ptr<IoEngine>> uring = internal::MakeUringEngine(options.queue_depth);
  if (uring.ok() || kind == IoEngineKind::kIoUring) return uring;
  return internal::MakeThreadEngine(
      options.queue_depth, absl::StrCat("io_uring unavailable: ", uring.status().message()));
}

}  // namespace weft::offload
