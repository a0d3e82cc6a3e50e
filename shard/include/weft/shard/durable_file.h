// Files that survive a crash whole or not at all: what checkpoints are made of.
//
// WriteFileAtomically writes a temporary file beside `path`, fsyncs it, renames it over `path`
// and fsyncs the directory, so a crash leaves either the old content or the new one. WriteAll and
// SyncPath are its parts, for callers that stream a file of their own.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::shard {

// `data` to `path` through `path`.tmp; the directory is fsynced after the rename.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data);
// Writes all `n` bytes to `fd` (retrying short writes and EINTR); errors name `path`.
absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path);
// fsync of a file or directory by path.
absl::Status SyncPath(const std::string& path);
// The whole file at `path`.
absl::Status ReadWholeFile(const std::string& path, std::string* out);

}  // namespace weft::shard
