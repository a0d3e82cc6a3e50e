#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::trainer {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

// FNV-1a style over 64-bit words (and the tail bytes): detects torn or flipped data, fast enough
// to run over every checkpoint.
uint64_t Checksum(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ULL;
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, data.data() + i, 8);
    h = (h ^ word) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < data.size(); ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ULL;
  return h;
}

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void PutFloats(std::string* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  template <typename T>
  bool Get(T* value) {
    if (pos_ + sizeof(T) > data_.size()) return false;
    std::memcpy(value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string* out) {
    if (n > data_.size() - pos_) return false;
    out->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetFloats(size_t n, std::vector<float>* out) {
    if (n > (data_.size() - pos_) / sizeof(float)) return false;
    out->resize(n);
    std::memcpy(out->data(), data_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync", path);
  return absl::OkStatus();
}

// Writes `data` to `path` atomically: temporary file, fsync, rename, fsync of the directory.
absl::Status WriteAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("write", tmp);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status s = Errno("fsync", tmp);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return Errno("close", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename to", path);
  return FsyncPath(std::filesystem::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
}

std::string Dir(const std::string& dir) { return dir + "/checkpoints"; }

// Steps of the ckpt-<step>.bin files under the checkpoint directory, newest first.
std::vector<int64_t> ListSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(Dir(dir), ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step;
    if (name.starts_with("ckpt-") && name.ends_with(".bin") &&
        absl::SimpleAtoi(name.substr(5, name.size() - 9), &step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%08d.bin", Dir(dir), step);
}

absl::Status WriteCheckpoint(const std::string& dir, const CheckpointState& state, int keep) {
  std::error_code ec;
  std::filesystem::create_directories(Dir(dir), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory ", Dir(dir), ": ", ec.message()));
  }
  std::string payload;
  payload.reserve(64 + state.config_json.size() + 3 * state.params.size() * sizeof(float));
  Put(&payload, state.step);
  Put(&payload, state.data_cursor);
  Put(&payload, state.sample_rng);
  Put(&payload, state.optimizer_step);
  Put(&payload, static_cast<uint64_t>(state.params.size()));
  Put(&payload, static_cast<uint64_t>(state.config_json.size()));
  payload += state.config_json;
  PutFloats(&payload, state.params);
  PutFloats(&payload, state.adam_m);
  PutFloats(&payload, state.adam_v);

  std::string file(kMagic, sizeof(kMagic));
  Put(&file, kVersion);
  Put(&file, uint32_t{0});
  Put(&file, static_cast<uint64_t>(payload.size()));
  Put(&file, Checksum(payload));
  file += payload;

  const std::string path = CheckpointPath(dir, state.step);
  if (absl::Status s = WriteAtomically(path, file); !s.ok()) return s;
  const std::string name = std::filesystem::path(path).filename().string() + "\n";
  if (absl::Status s = WriteAtomically(Dir(dir) + "/latest", name); !s.ok()) return s;

  const std::vector<int64_t> steps = ListSteps(dir);
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i) {
    std::filesystem::remove(CheckpointPath(dir, steps[i]), ec);
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path) {
  std::string file;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open checkpoint", path);
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        absl::Status s = Errno("read", path);
        ::close(fd);
        return s;
      }
      if (n == 0) break;
      file.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
  }
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: ", why));
  };
  if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt(absl::StrCat("no checkpoint header (", file.size(), " bytes)"));
  }
  uint32_t version, reserved;
  uint64_t size, checksum;
  std::memcpy(&version, file.data() + 8, 4);
  std::memcpy(&reserved, file.data() + 12, 4);
  std::memcpy(&size, file.data() + 16, 8);
  std::memcpy(&checksum, file.data() + 24, 8);
  if (version != kVersion) {
    return corrupt(absl::StrCat("format version ", version, ", this program reads ", kVersion));
  }
  if (size != file.size() - kHeaderBytes) {
    return corrupt(absl::StrCat("truncated or padded: header promises ", size,
                                " payload bytes, file holds ", file.size() - kHeaderBytes));
  }
  const std::string payload = file.substr(kHeaderBytes);
  if (Checksum(payload) != checksum) return corrupt("checksum mismatch");

  CheckpointState state;
  Reader reader(payload);
  uint64_t n_params = 0, config_len = 0;
  if (!reader.Get(&state.step) || !reader.Get(&state.data_cursor) ||
      !reader.Get(&state.sample_rng) || !reader.Get(&state.optimizer_step) ||
      !reader.Get(&n_params) || !reader.Get(&config_len) ||
      !reader.GetBytes(config_len, &state.config_json) ||
      !reader.GetFloats(n_params, &state.params) || !reader.GetFloats(n_params, &state.adam_m) ||
      !reader.GetFloats(n_params, &state.adam_v) || !reader.AtEnd()) {
    return corrupt("fields do not fit the payload");
  }
  return state;
}

std::optional<CheckpointState> LoadNewestValid(const std::string& dir,
                                               std::vector<std::string>* rejected,
                                               std::string* loaded_path) {
  for (int64_t step : ListSteps(dir)) {
    const std::string path = CheckpointPath(dir, step);
    absl::StatusOr<CheckpointState> state = ReadCheckpoint(path);
    if (state.ok()) {
      *loaded_path = path;
      return std::move(*state);
    }
    rejected->push_back(std::string(state.status().message()));
  }
  return std::nullopt;
}

}  // namespace weft::trainer
