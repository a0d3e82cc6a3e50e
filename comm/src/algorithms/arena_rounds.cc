#include "algorithms/arena_rounds.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace weft {

static_assert(sizeof(Envelope) <= ShmArena::kPayloadBytes);

size_t ArenaRounds::AreaBytes() { return 2 * kHalfBytes; }

std::byte* ArenaRounds::Half(int r, uint64_t round) const {
  return arena_.area(r) + (round % 2) * kHalfBytes;
}

absl::Status ArenaRounds::WaitAll(int counter, uint64_t value) const {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j == arena_.local_rank()) continue;
    if (absl::Status s = WaitFor(j, counter, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool ArenaRounds::MustWaitForDone(uint64_t round) const {
  // Seeing everyone begin the previous round proves what kDone would.
  return round > 2 && peers_.arena_synced_round() + 1 < round;
}

bool ArenaRounds::CanBeginNow() const {
  const uint64_t round = peers_.arena_round() + 1;
  if (!MustWaitForDone(round)) return true;
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j != arena_.local_rank() && arena_.Read(j, kDone) < round - 2) return false;
  }
  return true;
}

size_t ArenaRounds::Window(uint64_t round, size_t bytes) {
  if (bytes == 0) return 0;
  // Windows start on pages, so that copies into them run aligned, and move over the whole half:
  // any round of up to half of it then writes lines that the peers read at least four rounds
  // ago, not two, which their caches have mostly let go of.
  constexpr size_t kPage = 4096, kSpan = kHalfBytes;
  const size_t stride = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  const size_t windows = std::max<size_t>(1, kSpan / stride);
  return (round / 2) % windows * stride;
}

absl::StatusOr<ArenaRounds::Round> ArenaRounds::Begin(size_t bytes) {
  const uint64_t round = peers_.NextArenaRound();
  if (MustWaitForDone(round)) {
    if (absl::Status s = WaitAll(kDone, round - 2); !s.ok()) return s;
  }
  if (first_round_ == 0) first_round_ = round;
  const size_t window = Window(round, bytes);
  return Round{round, window, Half(arena_.local_rank(), round) + window};
}

void ArenaRounds::PublishCopiedIn(uint64_t round) {
  // Every round carries the envelope, not only the first: a mismatched peer may compare any.
  arena_.PublishWith(kCopiedIn + round % 2, round, &peers_.envelope(), sizeof(Envelope));
}

absl::Status ArenaRounds::WaitCopiedIn(int r, uint64_t round) const {
  return WaitFor(r, kCopiedIn + round % 2, round);
}

absl::Status ArenaRounds::WaitAllBegun(uint64_t round) {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j == arena_.local_rank()) continue;
    if (absl::Status s = WaitCopiedIn(j, round); !s.ok()) return s;
  }
  peers_.NoteArenaSynced(round);
  return absl::OkStatus();
}

void ArenaRounds::PublishLine(uint64_t round, const void* data, size_t bytes) {
  std::byte line[ShmArena::kPayloadBytes];
  std::memcpy(line, &peers_.envelope(), sizeof(Envelope));
  size_t in_line = 0;
  if (bytes > kLineBytes) {
    std::memcpy(Half(arena_.local_rank(), round) + Window(round, bytes), data, bytes);
  } else if (bytes > 0) {
    std::memcpy(line + sizeof(Envelope), data, bytes);
    in_line = bytes;
  }
  arena_.PublishWith(kLine + round % 2, round, line, sizeof(Envelope) + in_line);
  PublishCopiedIn(round);
}

absl::Status ArenaRounds::WaitLines(uint64_t round) {
  const int index = kLine + round % 2;
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j == arena_.local_rank()) continue;
    if (absl::Status s = WaitFor(j, index, round); !s.ok()) return s;
    if (absl::Status s = CompareEnvelope(j, arena_.Payload(j, index)); !s.ok()) return s;
  }
  peers_.NoteArenaSynced(round);
  return absl::OkStatus();
}

bool ArenaRounds::LinesPosted(uint64_t round) const {
  const int index = kLine + round % 2;
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (j != arena_.local_rank() && arena_.Read(j, index) < round) return false;
  }
  return true;
}

const std::byte* ArenaRounds::LineData(int r, uint64_t round, size_t bytes) const {
  if (bytes > kLineBytes) return Half(r, round) + Window(round, bytes);
  return arena_.Payload(r, kLine + round % 2) + sizeof(Envelope);
}

absl::Status ArenaRounds::CheckFingerprint(int r, uint64_t round) const {
  if (round != first_round_ || r == arena_.local_rank()) return absl::OkStatus();
  return CompareEnvelope(r, arena_.Payload(r, kCopiedIn + round % 2));
}

absl::Status ArenaRounds::CompareEnvelope(int r, const std::byte* published) const {
  Envelope theirs;
  std::memcpy(&theirs, published, sizeof(theirs));
  const Envelope& mine = peers_.envelope();
  if (theirs == mine) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("mismatched collective: rank ", arena_.global_rank(r), " called ",
                   DescribeEnvelope(theirs), " while this rank called ", DescribeEnvelope(mine)));
}

absl::Status ArenaRounds::CheckAllFingerprints(uint64_t round) const {
  for (int j = 0; j < arena_.local_size(); ++j) {
    if (absl::Status s = CheckFingerprint(j, round); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace weft
