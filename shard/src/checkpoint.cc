#include "weft/shard/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "weft/kernels/hash.h"
#include "weft/shard/durable_file.h"

namespace weft::shard {
namespace {

constexpr char kFormat[] = "weft-checkpoint";
constexpr int64_t kVersion = 1;
constexpr size_t kMaxDims = 8;
constexpr uint64_t kMaxElements = uint64_t{1} << 48;  // beyond any model; bounds the arithmetic

std::string FileName(int rank) { return absl::StrFormat("rank-%05d.bin", rank); }

// Every rank learns every rank's outcome of a phase, so all of them stop together: the failing
// rank returns its own error, the others one that names it.
absl::Status Agree(Communicator* comm, const absl::Status& mine, absl::string_view phase,
                   absl::Duration timeout) {
  if (comm == nullptr) return mine;
  std::vector<int64_t> codes(comm->size());
  const int64_t code = static_cast<int64_t>(mine.code());
  if (absl::Status s = comm->AllGather(&code, codes.data(), 1, DataType::kInt64).Wait(timeout);
      !s.ok()) {
    return s;
  }
  if (!mine.ok()) return mine;
  for (int r = 0; r < comm->size(); ++r) {
    if (codes[r] != 0) {
      return absl::Status(
          static_cast<absl::StatusCode>(codes[r]),
          absl::StrCat("rank ", comm->rank(), ": checkpoint: rank ", r, " failed to ", phase));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPieces(const std::vector<std::string>& arrays,
                         const std::vector<TensorInfo>& tensors,
                         const std::vector<SavedPiece>& mine) {
  if (arrays.empty()) return absl::InvalidArgumentError("checkpoint: no arrays");
  for (const SavedPiece& p : mine) {
    if (p.tensor < 0 || p.tensor >= static_cast<int>(tensors.size())) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint: no tensor ", p.tensor));
    }
    const TensorInfo& t = tensors[p.tensor];
    if (p.count == 0 || p.from > t.elements() || p.count > t.elements() - p.from) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint: piece [", p.from, ", ", p.from + p.count, ") of ", t.name, " (",
                       t.elements(), " elements) is empty or outside it"));
    }
    if (p.data.size() != arrays.size()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint: a piece of ", t.name, " has ",
                                                     p.data.size(), " arrays, not ",
                                                     arrays.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status Prepare(const std::string& dir, const std::string& tmp,
                     const std::string& metadata_json) {
  absl::StatusOr<JsonValue> metadata = ParseJson(metadata_json);
  if (!metadata.ok() || metadata->type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError("checkpoint: the metadata is not a JSON object");
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint ", dir, " exists already"));
  }
  std::filesystem::remove_all(tmp, ec);  // a crashed save's leftovers: never read
  if (!std::filesystem::create_directories(tmp, ec)) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// This rank's file: for each array in turn, its pieces back to back.
absl::Status WriteRankFile(const std::string& path, size_t arrays,
                           const std::vector<SavedPiece>& mine, uint64_t* checksum) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  Checksum64Stream stream;
  absl::Status s;
  for (size_t a = 0; a < arrays && s.ok(); ++a) {
    for (const SavedPiece& p : mine) {
      const size_t bytes = p.count * sizeof(float);
      s = WriteAll(fd, p.data[a], bytes, path);
      if (!s.ok()) break;
      stream.Add(p.data[a], bytes);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::InternalError(absl::StrCat("fsync ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  *checksum = stream.Finish();
  return s;
}

// Every rank's (elements, checksum, then (tensor, from, count) per piece), on rank 0.
absl::Status GatherTables(Communicator* comm, const std::vector<SavedPiece>& mine,
                          uint64_t elements, uint64_t checksum, absl::Duration timeout,
                          std::vector<std::vector<uint64_t>>* tables) {
  std::vector<uint64_t> table = {elements, checksum};
  for (const SavedPiece& p : mine) {
    table.insert(table.end(), {static_cast<uint64_t>(p.tensor), p.from, p.count});
  }
  if (comm == nullptr) {
    tables->push_back(std::move(table));
    return absl::OkStatus();
  }
  // Fixed-size rows: the longest table sets the width, shorter ones end in count-0 triples.
  int64_t width = static_cast<int64_t>(table.size());
  absl::Status s =
      comm->AllReduce(&width, &width, 1, DataType::kInt64, ReduceOp::kMax).Wait(timeout);
  if (!s.ok()) return s;
  table.resize(static_cast<size_t>(width), 0);
  std::vector<uint64_t> all(table.size() * comm->size());
  s = comm->AllGather(table.data(), all.data(), table.size(), DataType::kUint64).Wait(timeout);
  if (!s.ok()) return s;
  for (int r = 0; r < comm->size(); ++r) {
    tables->emplace_back(all.begin() + r * table.size(), all.begin() + (r + 1) * table.size());
  }
  return absl::OkStatus();
}

// Sorts each tensor's pieces and checks that they tile it.
absl::Status CheckTiling(Manifest* manifest) {
  for (ManifestTensor& t : manifest->tensors) {
    std::sort(t.pieces.begin(), t.pieces.end(),
              [](const PieceRecord& a, const PieceRecord& b) { return a.from < b.from; });
    uint64_t next = 0;
    for (const PieceRecord& p : t.pieces) {
      if (p.from != next) {
        return absl::DataLossError(absl::StrCat(
            "tensor ", t.info.name, ": ",
            p.from < next ? "elements saved twice" : "elements missing", " before element ", p.from,
            " (piece of rank ", manifest->files[p.file].rank, ")"));
      }
      next = p.from + p.count;
    }
    if (next != t.info.elements()) {
      return absl::DataLossError(absl::StrCat("tensor ", t.info.name, ": elements ", next, " to ",
                                              t.info.elements(), " saved by no rank"));
    }
  }
  return absl::OkStatus();
}

absl::Status Commit(const std::string& dir, const std::string& tmp, int world,
                    const std::vector<std::string>& arrays, const std::vector<TensorInfo>& tensors,
                    const std::vector<std::vector<uint64_t>>& tables,
                    const std::string& metadata_json) {
  Manifest manifest;
  manifest.world = world;
  manifest.arrays = arrays;
  for (const TensorInfo& t : tensors) manifest.tensors.push_back({t, {}});
  for (int r = 0; r < static_cast<int>(tables.size()); ++r) {
    const std::vector<uint64_t>& table = tables[r];
    if (table[0] == 0) continue;
    const int file = static_cast<int>(manifest.files.size());
    manifest.files.push_back({FileName(r), r, table[0], table[1]});
    uint64_t at = 0;
    for (size_t i = 2; i + 3 <= table.size() && table[i + 2] > 0; i += 3) {
      manifest.tensors[table[i]].pieces.push_back({file, at, table[i + 1], table[i + 2]});
      at += table[i + 2];
    }
  }
  if (absl::Status s = CheckTiling(&manifest); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir, ": ", s.message()));
  }
  manifest.metadata = *ParseJson(metadata_json);  // Prepare checked it
  // The manifest goes in last: DIR.tmp becomes DIR only once everything in it is durable.
  if (absl::Status s = WriteFileAtomically(tmp + "/manifest.json", ManifestJson(manifest));
      !s.ok()) {
    return s;
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("rename ", tmp, " to ", dir, ": ", std::strerror(errno)));
  }
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  return SyncPath(parent.empty() ? "." : parent);
}

// Manifest fields, read strictly: a missing or mistyped field is corruption.
class Fields {
 public:
  explicit Fields(std::string* error) : error_(error) {}

  const JsonValue* Member(const JsonValue& object, const char* key, JsonValue::Type type) {
    const JsonValue* v = object.Find(key);
    if (v == nullptr || v->type != type)
      return Fail(absl::StrCat("field \"", key, "\" missing or mistyped"));
    return v;
  }
  bool Uint(const JsonValue& v, uint64_t limit, uint64_t* out, absl::string_view what) {
    if (v.type != JsonValue::Type::kNumber || !v.is_integer || v.integer < 0 ||
        static_cast<uint64_t>(v.integer) > limit) {
      Fail(absl::StrCat(what, " is not an integer in [0, ", limit, "]"));
      return false;
    }
    *out = static_cast<uint64_t>(v.integer);
    return true;
  }
  bool UintMember(const JsonValue& object, const char* key, uint64_t limit, uint64_t* out) {
    const JsonValue* v = Member(object, key, JsonValue::Type::kNumber);
    return v != nullptr && Uint(*v, limit, out, absl::StrCat("\"", key, "\""));
  }
  std::nullptr_t Fail(std::string why) {
    if (error_->empty()) *error_ = std::move(why);
    return nullptr;
  }
  bool ok() const { return error_->empty(); }

 private:
  std::string* error_;
};

bool ParseTensor(const JsonValue& v, const Manifest& manifest, Fields& f, ManifestTensor* out) {
  const JsonValue* name = f.Member(v, "name", JsonValue::Type::kString);
  const JsonValue* shape = f.Member(v, "shape", JsonValue::Type::kArray);
  const JsonValue* dtype = f.Member(v, "dtype", JsonValue::Type::kString);
  const JsonValue* pieces = f.Member(v, "pieces", JsonValue::Type::kArray);
  if (!f.ok()) return false;
  out->info.name = name->text;
  out->info.dtype = dtype->text;
  if (dtype->text != "f32") return f.Fail(absl::StrCat(name->text, ": dtype ", dtype->text)), false;
  if (shape->items.size() > kMaxDims) return f.Fail(absl::StrCat(name->text, ": rank")), false;
  uint64_t elements = 1;
  for (const JsonValue& d : shape->items) {
    uint64_t dim;
    if (!f.Uint(d, kMaxElements, &dim, "a dimension")) return false;
    if (dim != 0 && elements > kMaxElements / dim) return f.Fail("a tensor too large"), false;
    elements *= dim;
    out->info.shape.push_back(static_cast<int64_t>(dim));
  }
  for (const JsonValue& p : pieces->items) {
    uint64_t fields[4];
    if (p.type != JsonValue::Type::kArray || p.items.size() != 4) {
      return f.Fail(absl::StrCat(name->text, ": a piece is not [file, at, from, count]")), false;
    }
    for (int i = 0; i < 4; ++i) {
      if (!f.Uint(p.items[i], kMaxElements, &fields[i], "a piece field")) return false;
    }
    if (fields[0] >= manifest.files.size() ||
        fields[1] + fields[3] > manifest.files[fields[0]].elements || fields[3] == 0) {
      return f.Fail(absl::StrCat(name->text, ": a piece lies outside its file")), false;
    }
    out->pieces.push_back({static_cast<int>(fields[0]), fields[1], fields[2], fields[3]});
  }
  return true;
}

}  // namespace

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

absl::Status SaveCheckpoint(Communicator* comm, const std::string& dir,
                            const std::vector<std::string>& arrays,
                            const std::vector<TensorInfo>& tensors,
                            const std::vector<SavedPiece>& mine, const std::string& metadata_json,
                            absl::Duration timeout) {
  const int rank = comm != nullptr ? comm->rank() : 0;
  const int world = comm != nullptr ? comm->size() : 1;
  const std::string tmp = dir + ".tmp";
  absl::Status s = CheckPieces(arrays, tensors, mine);
  if (s.ok() && rank == 0) s = Prepare(dir, tmp, metadata_json);
  s = Agree(comm, s, "prepare the checkpoint", timeout);
  if (!s.ok()) return s;

  uint64_t elements = 0, checksum = 0;
  for (const SavedPiece& p : mine) elements += p.count;
  if (elements > 0) s = WriteRankFile(tmp + "/" + FileName(rank), arrays.size(), mine, &checksum);
  s = Agree(comm, s, "write its file", timeout);
  std::vector<std::vector<uint64_t>> tables;
  if (s.ok()) s = GatherTables(comm, mine, elements, checksum, timeout, &tables);
  if (s.ok() && rank == 0) s = Commit(dir, tmp, world, arrays, tensors, tables, metadata_json);
  s = Agree(comm, s, "commit the checkpoint", timeout);
  if (!s.ok() && rank == 0) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  }
  return s;
}

std::string ManifestJson(const Manifest& manifest) {
  std::string out = absl::StrCat("{\n  \"format\": \"", kFormat, "\",\n  \"version\": ", kVersion,
                                 ",\n  \"world\": ", manifest.world, ",\n  \"arrays\": [");
  for (size_t a = 0; a < manifest.arrays.size(); ++a) {
    absl::StrAppend(&out, a == 0 ? "" : ", ", JsonQuote(manifest.arrays[a]));
  }
  out += "],\n  \"files\": [";
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const CheckpointFile& f = manifest.files[i];
    absl::StrAppendFormat(&out,
                          "%s\n    {\"name\": %s, \"rank\": %d, \"elements\": %d, "
                          "\"checksum\": \"%016x\"}",
                          i == 0 ? "" : ",", JsonQuote(f.name), f.rank, f.elements, f.checksum);
  }
  out += "\n  ],\n  \"tensors\": [";
  for (size_t i = 0; i < manifest.tensors.size(); ++i) {
    const ManifestTensor& t = manifest.tensors[i];
    absl::StrAppend(&out, i == 0 ? "" : ",", "\n    {\"name\": ", JsonQuote(t.info.name),
                    ", \"shape\": [", absl::StrJoin(t.info.shape, ", "),
                    "], \"dtype\": ", JsonQuote(t.info.dtype), ", \"pieces\": [");
    for (size_t j = 0; j < t.pieces.size(); ++j) {
      const PieceRecord& p = t.pieces[j];
      absl::StrAppend(&out, j == 0 ? "" : ", ", "[", p.file, ", ", p.at, ", ", p.from, ", ",
                      p.count, "]");
    }
    out += "]}";
  }
  absl::StrAppend(&out, "\n  ],\n  \"metadata\": ", JsonText(manifest.metadata), "\n}\n");
  return out;
}

absl::StatusOr<Manifest> ParseManifest(const std::string& text) {
  absl::StatusOr<JsonValue> doc = ParseJson(text);
  if (!doc.ok()) return absl::DataLossError(absl::StrCat("manifest: ", doc.status().message()));
  std::string error;
  Fields f(&error);
  Manifest manifest;
  const JsonValue* format = f.Member(*doc, "format", JsonValue::Type::kString);
  uint64_t version = 0, world = 0;
  f.UintMember(*doc, "version", 1000, &version);
  f.UintMember(*doc, "world", 1 << 20, &world);
  const JsonValue* arrays = f.Member(*doc, "arrays", JsonValue::Type::kArray);
  const JsonValue* files = f.Member(*doc, "files", JsonValue::Type::kArray);
  const JsonValue* tensors = f.Member(*doc, "tensors", JsonValue::Type::kArray);
  const JsonValue* metadata = f.Member(*doc, "metadata", JsonValue::Type::kObject);
  if (f.ok() && (format->text != kFormat || version != kVersion)) {
    f.Fail(absl::StrCat("format ", format->text, " version ", version, "; this program reads ",
                        kFormat, " version ", kVersion));
  }
  if (f.ok()) {
    manifest.world = static_cast<int>(world);
    manifest.metadata = *metadata;
    for (const JsonValue& a : arrays->items) {
      if (a.type != JsonValue::Type::kString) f.Fail("an array name is not a string");
      manifest.arrays.push_back(a.text);
    }
    if (manifest.arrays.empty()) f.Fail("no arrays");
  }
  for (size_t i = 0; f.ok() && i < files->items.size(); ++i) {
    const JsonValue& v = files->items[i];
    CheckpointFile file;
    const JsonValue* name = f.Member(v, "name", JsonValue::Type::kString);
    const JsonValue* checksum = f.Member(v, "checksum", JsonValue::Type::kString);
    uint64_t rank = 0;
    f.UintMember(v, "rank", world > 0 ? world - 1 : 0, &rank);
    f.UintMember(v, "elements", kMaxElements, &file.elements);
    if (!f.ok()) break;
    // Names stay inside the checkpoint directory.
    if (name->text.empty() || name->text.find('/') != std::string::npos || name->text[0] == '.') {
      f.Fail(absl::StrCat("file name \"", name->text, "\""));
    } else if (checksum->text.size() != 16 ||
               !absl::SimpleHexAtoi(checksum->text, &file.checksum)) {
      f.Fail(absl::StrCat("checksum \"", checksum->text, "\""));
    }
    file.name = name->text;
    file.rank = static_cast<int>(rank);
    manifest.files.push_back(std::move(file));
  }
  for (size_t i = 0; f.ok() && i < tensors->items.size(); ++i) {
    ManifestTensor t;
    if (ParseTensor(tensors->items[i], manifest, f, &t)) manifest.tensors.push_back(std::move(t));
  }
  if (f.ok()) {
    if (absl::Status s = CheckTiling(&manifest); !s.ok()) f.Fail(std::string(s.message()));
  }
  if (!f.ok()) return absl::DataLossError(absl::StrCat("manifest: ", error));
  return manifest;
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::string text;
  if (absl::Status s = ReadWholeFile(path, &text); !s.ok()) {
    if (absl::IsNotFound(s)) {
      return absl::NotFoundError(
          absl::StrCat(dir, " has no manifest.json: not a complete checkpoint"));
    }
    return s;
  }
  absl::StatusOr<Manifest> manifest = ParseManifest(text);
  if (!manifest.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", manifest.status().message()));
  }
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->dir_ = dir;
  reader->manifest_ = *std::move(manifest);
  const uint64_t arrays = reader->manifest_.arrays.size();
  for (const CheckpointFile& file : reader->manifest_.files) {
    const std::string file_path = dir + "/" + file.name;
    const int fd = ::open(file_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": cannot open ", file.name, ": ",
                                              std::strerror(errno)));
    }
    reader->fds_.push_back(fd);
    struct stat st;
    const uint64_t expected = file.elements * arrays * sizeof(float);
    if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != expected) {
      return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": ", file.name, " holds ",
                                              st.st_size, " bytes, the manifest says ", expected));
    }
  }
  return reader;
}

CheckpointReader::~CheckpointReader() {
  for (int fd : fds_) ::close(fd);
}

int CheckpointReader::FindTensor(const std::string& name) const {
  for (size_t i = 0; i < manifest_.tensors.size(); ++i) {
    if (manifest_.tensors[i].info.name == name) return static_cast<int>(i);
  }
  return -1;
}

int CheckpointReader::FindArray(const std::string& name) const {
  const auto it = std::find(manifest_.arrays.begin(), manifest_.arrays.end(), name);
  return it == manifest_.arrays.end() ? -1 : static_cast<int>(it - manifest_.arrays.begin());
}

namespace {

// Exactly `n` bytes at `offset` of `fd`.
bool ReadAt(int fd, uint64_t offset, size_t n, void* out) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

absl::Status CheckpointReader::Verify(int first, int stride) const {
  std::vector<char> buffer(1 << 20);
  for (size_t i = static_cast<size_t>(first); i < manifest_.files.size();
       i += static_cast<size_t>(stride)) {
    const CheckpointFile& file = manifest_.files[i];
    const uint64_t size = file.elements * manifest_.arrays.size() * sizeof(float);
    Checksum64Stream stream;
    for (uint64_t at = 0; at < size; at += buffer.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - at));
      if (!ReadAt(fds_[i], at, n, buffer.data())) {
        return absl::DataLossError(absl::StrCat("checkpoint ", dir_, ": cannot read ", file.name));
      }
      stream.Add(buffer.data(), n);
    }
    if (stream.Finish() != file.checksum) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", dir_, ": ", file.name, " fails its checksum"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::Read(int tensor, int array, uint64_t from, uint64_t count,
                                    float* out) const {
  if (tensor < 0 || tensor >= static_cast<int>(manifest_.tensors.size()) || array < 0 ||
      array >= static_cast<int>(manifest_.arrays.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", dir_, ": no tensor ", tensor, " or array ", array));
  }
  const ManifestTensor& t = manifest_.tensors[tensor];
  if (from > t.info.elements() || count > t.info.elements() - from) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir_, ": elements [", from, ", ",
                                                   from + count, ") of ", t.info.name, " (",
                                                   t.info.elements(), ")"));
  }
  const uint64_t end = from + count;
  for (const PieceRecord& p : t.pieces) {
    const uint64_t lo = std::max(from, p.from);
    const uint64_t hi = std::min(end, p.from + p.count);
    if (lo >= hi) continue;
    const CheckpointFile& file = manifest_.files[p.file];
    const uint64_t element = array * file.elements + p.at + (lo - p.from);
    if (!ReadAt(fds_[p.file], element * sizeof(float), (hi - lo) * sizeof(float),
                out + (lo - from))) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", dir_, ": cannot read ", t.info.name, " from ", file.name));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::shard
