#include "safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "weft/shard/durable_file.h"

namespace weft::ckpt {
namespace {

// The checkpoint's floats are written as the reader returns them: both formats are little-endian.
static_assert(std::endian::native == std::endian::little);

constexpr uint64_t kChunk = uint64_t{1} << 20;  // floats per read: a 4 MiB buffer

// The JSON header, padded with spaces so that the data after it starts 8-byte aligned.
absl::StatusOr<std::string> Header(
    const shard::Manifest& manifest, const std::vector<ExportedTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::set<std::string> names = {"__metadata__"};
  std::string header = "{";
  uint64_t offset = 0;
  for (const ExportedTensor& t : tensors) {
    const shard::TensorInfo& info = manifest.tensors[t.tensor].info;
    if (info.dtype != "f32") {
      return absl::InvalidArgumentError(absl::StrCat(info.name, ": dtype ", info.dtype));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("the name \"", t.name, "\" is taken twice in the safetensors header"));
    }
    const uint64_t end = offset + info.elements() * sizeof(float);
    absl::StrAppend(&header, JsonQuote(t.name), ":{\"dtype\":\"F32\",\"shape\":[",
                    absl::StrJoin(info.shape, ","), "],\"data_offsets\":[", offset, ",", end,
                    "]},");
    offset = end;
  }
  header += "\"__metadata__\":{";
  for (size_t i = 0; i < metadata.size(); ++i) {
    absl::StrAppend(&header, i == 0 ? "" : ",", JsonQuote(metadata[i].first), ":",
                    JsonQuote(metadata[i].second));
  }
  header += "}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

absl::Status WriteFile(int fd, const std::string& path, const std::string& header,
                       const shard::CheckpointReader& reader,
                       const std::vector<ExportedTensor>& tensors) {
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  absl::Status s = shard::WriteAll(fd, length, sizeof(length), path);
  if (s.ok()) s = shard::WriteAll(fd, header.data(), header.size(), path);
  std::vector<float> buffer;
  for (const ExportedTensor& t : tensors) {
    const uint64_t elements = reader.manifest().tensors[t.tensor].info.elements();
    for (uint64_t from = 0; s.ok() && from < elements; from += kChunk) {
      const uint64_t count = std::min(kChunk, elements - from);
      buffer.resize(count);
      s = reader.Read(t.tensor, t.array, from, count, buffer.data());
      if (s.ok()) s = shard::WriteAll(fd, buffer.data(), count * sizeof(float), path);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::InternalError(absl::StrCat("fsync ", path, ": ", std::strerror(errno)));
  }
  return s;
}

}  // namespace

absl::Status WriteSafetensors(const shard::CheckpointReader& reader,
                              const std::vector<ExportedTensor>& tensors,
                              const std::vector<std::pair<std::string, std::string>>& metadata,
                              const std::string& path) {
  absl::StatusOr<std::string> header = Header(reader.manifest(), tensors, metadata);
  if (!header.ok()) return header.status();
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  absl::Status s = WriteFile(fd, tmp, *header, reader, tensors);
  if (::close(fd) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("close ", tmp, ": ", std::strerror(errno)));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return shard::SyncPath(parent.empty() ? "." : parent);
}

}  // namespace weft::ckpt
