#include "checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "weft/kernels/hash.h"

namespace weft::trainer {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};
// Version 2 added the tensor table; version 1 files are not read.
constexpr uint32_t kVersion = 2;
constexpr uint64_t kMaxRank = 8;  // a tensor table entry with more dimensions is corrupt
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void PutString(std::string* out, const std::string& s) {
  Put(out, static_cast<uint64_t>(s.size()));
  *out += s;
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
  bool GetString(std::string* out) {
    uint64_t n;
    return Get(&n) && GetBytes(n, out);
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

// The numbers N of the files (or directories) <prefix>N<suffix> in `dir`, newest (highest) first.
std::vector<int64_t> ListNumbered(const std::string& dir, std::string_view prefix,
                                  std::string_view suffix) {
  std::vector<int64_t> numbers;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t n;
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) &&
        name.ends_with(suffix) &&
        absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                         &n)) {
      numbers.push_back(n);
    }
  }
  std::sort(numbers.rbegin(), numbers.rend());
  return numbers;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// At most kShown items of `items`, then how many more there are: a changed width touches every
// tensor, and the first few differences say enough.
std::string Listed(const std::vector<std::string>& items, absl::string_view separator) {
  constexpr size_t kShown = 6;
  if (items.size() <= kShown) return absl::StrJoin(items, separator);
  return absl::StrCat(absl::StrJoin(items.begin(), items.begin() + kShown, separator), separator,
                      "and ", items.size() - kShown, " more");
}

}  // namespace

std::vector<TensorRecord> TensorTable(const ParamLayout& layout) {
  std::vector<TensorRecord> table;
  uint64_t offset = 0;
  for (const TensorView& t : layout.tensors()) {
    table.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), offset, "f32"});
    offset += t.size;
  }
  return table;
}

absl::Status CheckLayout(const std::vector<TensorRecord>& saved, const ParamLayout& layout) {
  const std::vector<TensorRecord> model = TensorTable(layout);
  std::vector<std::string> missing, extra, differs, moved;
  for (const TensorRecord& m : model) {
    const auto s = std::find_if(saved.begin(), saved.end(),
                                [&](const TensorRecord& r) { return r.name == m.name; });
    if (s == saved.end()) {
      missing.push_back(m.name);
    } else if (s->shape != m.shape) {
      differs.push_back(absl::StrCat(m.name, ": checkpoint ", ShapeText(s->shape), ", model ",
                                     ShapeText(m.shape)));
    } else if (s->dtype != m.dtype) {
      differs.push_back(absl::StrCat(m.name, ": checkpoint ", s->dtype, ", model ", m.dtype));
    } else if (s->offset != m.offset) {
      moved.push_back(absl::StrCat(m.name, " at offset ", s->offset, " in the checkpoint, ",
                                   m.offset, " in the model"));
    }
  }
  for (const TensorRecord& s : saved) {
    if (layout.Find(s.name) < 0) extra.push_back(s.name);
  }
  std::vector<std::string> problems;
  if (!missing.empty()) {
    problems.push_back(absl::StrCat("not in the checkpoint: ", Listed(missing, ", ")));
  }
  if (!extra.empty()) problems.push_back(absl::StrCat("not in the model: ", Listed(extra, ", ")));
  if (!differs.empty()) problems.push_back(Listed(differs, "; "));
  // Offsets follow from the names and shapes before them: report a move only when those agree,
  // where it can only mean a different order.
  if (problems.empty() && !moved.empty()) {
    problems.push_back(absl::StrCat("tensor order differs: ", Listed(moved, "; ")));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(problems, "; "));
}

std::string RunDir(const std::string& out_dir, int run) {
  return absl::StrFormat("%s/checkpoints/run-%03d", out_dir, run);
}

absl::StatusOr<int> OpenRun(const std::string& out_dir, bool resume) {
  const std::string root = out_dir + "/checkpoints";
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory ", root, ": ", ec.message()));
  }
  const std::vector<int64_t> runs = ListNumbered(root, "run-", "");
  if (resume && !runs.empty()) {
    const int run = static_cast<int>(runs.front());
    // Leftovers of a write that crashed before its rename; never read, so safe to drop.
    std::vector<std::filesystem::path> stale;
    for (const auto& entry : std::filesystem::directory_iterator(RunDir(out_dir, run), ec)) {
      if (entry.path().filename().string().ends_with(".tmp")) stale.push_back(entry.path());
    }
    for (const auto& path : stale) std::filesystem::remove(path, ec);
    return run;
  }
  // A fresh run claims the next free number; mkdir fails if a concurrent job took it first.
  for (int run = runs.empty() ? 1 : static_cast<int>(runs.front()) + 1;; ++run) {
    const std::string dir = RunDir(out_dir, run);
    if (::mkdir(dir.c_str(), 0755) == 0) return run;
    if (errno != EEXIST) return Errno("cannot create checkpoint run directory", dir);
  }
}

std::string CheckpointPath(const std::string& run_dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%08d.bin", run_dir, step);
}

absl::Status WriteCheckpoint(const std::string& run_dir, const CheckpointState& state, int keep) {
  std::string payload;
  payload.reserve(64 + state.config_json.size() + 3 * state.params.size() * sizeof(float));
  Put(&payload, state.step);
  Put(&payload, state.data_cursor);
  Put(&payload, state.sample_rng);
  Put(&payload, state.optimizer_step);
  Put(&payload, static_cast<uint64_t>(state.params.size()));
  Put(&payload, static_cast<uint64_t>(state.config_json.size()));
  payload += state.config_json;
  Put(&payload, static_cast<uint64_t>(state.tensors.size()));
  for (const TensorRecord& t : state.tensors) {
    PutString(&payload, t.name);
    PutString(&payload, t.dtype);
    Put(&payload, t.offset);
    Put(&payload, static_cast<uint64_t>(t.shape.size()));
    for (int64_t d : t.shape) Put(&payload, d);
  }
  PutFloats(&payload, state.params);
  PutFloats(&payload, state.adam_m);
  PutFloats(&payload, state.adam_v);

  std::string file(kMagic, sizeof(kMagic));
  Put(&file, kVersion);
  Put(&file, uint32_t{0});
  Put(&file, static_cast<uint64_t>(payload.size()));
  Put(&file, Checksum64(payload.data(), payload.size()));
  file += payload;

  const std::string path = CheckpointPath(run_dir, state.step);
  if (absl::Status s = WriteAtomically(path, file); !s.ok()) return s;
  const std::string name = std::filesystem::path(path).filename().string() + "\n";
  if (absl::Status s = WriteAtomically(run_dir + "/latest", name); !s.ok()) return s;

  const std::vector<int64_t> steps = ListNumbered(run_dir, "ckpt-", ".bin");
  std::error_code ec;
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i) {
    std::filesystem::remove(CheckpointPath(run_dir, steps[i]), ec);
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
  if (Checksum64(payload.data(), payload.size()) != checksum) return corrupt("checksum mismatch");

  CheckpointState state;
  Reader reader(payload);
  uint64_t n_params = 0, config_len = 0, n_tensors = 0;
  if (!reader.Get(&state.step) || !reader.Get(&state.data_cursor) ||
      !reader.Get(&state.sample_rng) || !reader.Get(&state.optimizer_step) ||
      !reader.Get(&n_params) || !reader.Get(&config_len) ||
      !reader.GetBytes(config_len, &state.config_json) || !reader.Get(&n_tensors)) {
    return corrupt("fields do not fit the payload");
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorRecord t;
    uint64_t rank = 0, size = 1;
    if (!reader.GetString(&t.name) || !reader.GetString(&t.dtype) || !reader.Get(&t.offset) ||
        !reader.Get(&rank) || rank > kMaxRank) {
      return corrupt("tensor table does not fit the payload");
    }
    t.shape.resize(rank);
    for (int64_t& d : t.shape) {
      if (!reader.Get(&d) || d < 0) return corrupt("tensor table does not fit the payload");
      size *= static_cast<uint64_t>(d);
    }
    if (t.offset > n_params || size > n_params - t.offset) {
      return corrupt(
          absl::StrCat("tensor ", t.name, " lies outside the ", n_params, " parameters"));
    }
    state.tensors.push_back(std::move(t));
  }
  if (!reader.GetFloats(n_params, &state.params) || !reader.GetFloats(n_params, &state.adam_m) ||
      !reader.GetFloats(n_params, &state.adam_v) || !reader.AtEnd()) {
    return corrupt("fields do not fit the payload");
  }
  return state;
}

std::optional<CheckpointState> LoadNewestValid(const std::string& run_dir,
                                               std::vector<std::string>* rejected,
                                               std::string* loaded_path) {
  for (int64_t step : ListNumbered(run_dir, "ckpt-", ".bin")) {
    const std::string path = CheckpointPath(run_dir, step);
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
