// weft-ckpt: inspects, verifies and exports the sharded checkpoints weft::shard writes (a
// directory of per-rank float32 files and manifest.json; weft/shard/checkpoint.h).
//
//   weft-ckpt list DIR      the manifest: format, world, arrays, metadata, files, tensors, totals
//   weft-ckpt verify DIR    every file's size and checksum, one line per file
//   weft-ckpt export DIR OUT.safetensors [--arrays params|all|NAME,...]
//                           full tensors as one safetensors file, after verifying every checksum
//
// It relies on the library's format only: the metadata (whatever the writer put there) is printed
// as JSON. Exit status: 0 on success; 1 when the checkpoint cannot be read, fails a checksum or has
// no such array, or the output cannot be written (the library's message on stderr); 2 for a usage
// error.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rank_list.h"
#include "safetensors.h"
#include "weft/shard/checkpoint.h"
#include "weft/shard/durable_file.h"

namespace {

using weft::JsonText;
using weft::JsonValue;
using weft::shard::CheckpointReader;
using weft::shard::Manifest;
using Reader = absl::StatusOr<std::unique_ptr<CheckpointReader>>;

constexpr char kUsage[] =
    "Usage: weft-ckpt list DIR\n"
    "       weft-ckpt verify DIR\n"
    "       weft-ckpt export DIR OUT.safetensors [--arrays params|all|NAME,...]\n"
    "  DIR: a checkpoint directory (manifest.json and rank-RRRRR.bin files)\n"
    "  list    the manifest: format, world, arrays, metadata, files, tensors and how they are\n"
    "          sharded; elements are per array\n"
    "  verify  every file's size and checksum; exit status 0 only if all pass\n"
    "  export  the full tensors as safetensors (F32), after verifying; --arrays picks the arrays\n"
    "          (default params); tensors of arrays other than params are named ARRAY.TENSOR\n";

int UsageError(const std::string& why) {
  std::fprintf(stderr, "weft-ckpt: %s\n%s", why.c_str(), kUsage);
  return 2;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "weft-ckpt: %s\n", std::string(status.message()).c_str());
  return 1;
}

// Columns two spaces apart; `right` marks those aligned right (numbers).
void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width(right.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool last = c + 1 == row.size();
      absl::StrAppend(&line, "  ", right[c] ? pad : "", row[c], right[c] || last ? "" : pad);
    }
    std::printf("%s\n", line.c_str());
  }
}

// "1 file", "2 files".
std::string Count(size_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// "4 pieces: ranks 0-3": how many pieces a tensor is cut into, and which ranks saved them.
std::string Sharding(const Manifest& m, const weft::shard::ManifestTensor& t) {
  if (t.pieces.empty()) return "0 pieces";
  std::vector<int64_t> ranks;
  for (const weft::shard::PieceRecord& p : t.pieces) ranks.push_back(m.files[p.file].rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return absl::StrCat(Count(t.pieces.size(), "piece"), ": ", weft::RankList(ranks));
}

int List(const std::string& dir) {
  Reader reader = CheckpointReader::Open(dir);
  if (!reader.ok()) return Fail(reader.status());
  const Manifest& m = (*reader)->manifest();
  // Manifest keeps no format or version (Open accepts only what this build reads): take them from
  // the file's text.
  std::string text;
  if (absl::Status s = weft::shard::ReadWholeFile(dir + "/manifest.json", &text); !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<JsonValue> doc = weft::ParseJson(text);
  if (!doc.ok()) return Fail(doc.status());
  std::printf("checkpoint %s\n", dir.c_str());
  std::printf("format:   %s, version %s\n", doc->Find("format")->text.c_str(),
              JsonText(*doc->Find("version")).c_str());
  std::printf("world:    %s\n", Count(m.world, "rank").c_str());
  std::printf("arrays:   %s\n", absl::StrJoin(m.arrays, ", ").c_str());
  std::printf("metadata:%s\n", m.metadata.names.empty() ? " {}" : "");
  for (size_t i = 0; i < m.metadata.names.size(); ++i) {
    std::printf("  %s: %s\n", m.metadata.names[i].c_str(), JsonText(m.metadata.values[i]).c_str());
  }

  const uint64_t file_bytes_per_element = m.arrays.size() * sizeof(float);
  uint64_t bytes = 0;
  std::vector<std::vector<std::string>> files = {{"file", "rank", "elements", "bytes", "checksum"}};
  for (const weft::shard::CheckpointFile& f : m.files) {
    bytes += f.elements * file_bytes_per_element;
    files.push_back({f.name, absl::StrCat(f.rank), absl::StrCat(f.elements),
                     absl::StrCat(f.elements * file_bytes_per_element),
                     absl::StrCat(absl::Hex(f.checksum, absl::kZeroPad16))});
  }
  std::printf("\nfiles:\n");
  PrintTable(files, {false, true, true, true, false});

  uint64_t elements = 0;
  std::vector<std::vector<std::string>> tensors = {
      {"tensor", "shape", "dtype", "elements", "sharding"}};
  for (const weft::shard::ManifestTensor& t : m.tensors) {
    elements += t.info.elements();
    tensors.push_back({t.info.name, absl::StrCat("[", absl::StrJoin(t.info.shape, ", "), "]"),
                       t.info.dtype, absl::StrCat(t.info.elements()), Sharding(m, t)});
  }
  std::printf("\ntensors:\n");
  PrintTable(tensors, {false, false, false, true, false});
  std::printf("\ntotal: %s, %s per array x %s, %s in %s\n",
              Count(m.tensors.size(), "tensor").c_str(), Count(elements, "element").c_str(),
              Count(m.arrays.size(), "array").c_str(), Count(bytes, "byte").c_str(),
              Count(m.files.size(), "file").c_str());
  return 0;
}

int Verify(const std::string& dir) {
  Reader reader = CheckpointReader::Open(dir);
  if (!reader.ok()) return Fail(reader.status());
  const std::vector<weft::shard::CheckpointFile>& files = (*reader)->manifest().files;
  size_t failed = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const absl::Status s = (*reader)->Verify(static_cast<int>(i), static_cast<int>(files.size()));
    failed += s.ok() ? 0 : 1;
    std::printf("%s: %s\n", files[i].name.c_str(),
                s.ok() ? "ok" : absl::StrCat("error: ", s.message()).c_str());
  }
  if (failed > 0) {
    std::fprintf(stderr, "weft-ckpt: %zu of %zu files fail verification\n", failed, files.size());
    return 1;
  }
  std::printf("all %zu files verified\n", files.size());
  return 0;
}

int Export(const std::string& dir, const std::string& out, const std::string& arrays_arg) {
  Reader reader = CheckpointReader::Open(dir);
  if (!reader.ok()) return Fail(reader.status());
  const Manifest& m = (*reader)->manifest();
  std::vector<std::string> arrays = m.arrays;
  if (arrays_arg != "all") arrays = absl::StrSplit(arrays_arg, ',');
  std::vector<weft::ckpt::ExportedTensor> tensors;
  for (const std::string& array : arrays) {
    const int a = (*reader)->FindArray(array);
    if (a < 0) {
      return Fail(
          absl::NotFoundError(absl::StrCat("checkpoint ", dir, " has no array \"", array,
                                           "\" (it has ", absl::StrJoin(m.arrays, ", "), ")")));
    }
    for (size_t t = 0; t < m.tensors.size(); ++t) {
      const std::string& name = m.tensors[t].info.name;
      tensors.push_back(
          {array == "params" ? name : absl::StrCat(array, ".", name), static_cast<int>(t), a});
    }
  }
  if (absl::Status s = (*reader)->Verify(); !s.ok()) {
    return Fail(absl::DataLossError(absl::StrCat(s.message(), "; nothing exported")));
  }
  std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}};
  if (const JsonValue* step = m.metadata.Find("step")) {
    metadata.emplace_back("step",
                          step->type == JsonValue::Type::kString ? step->text : JsonText(*step));
  }
  std::error_code ec;
  const std::filesystem::path source = std::filesystem::absolute(dir, ec);
  metadata.emplace_back("source", ec ? dir : source.lexically_normal().string());
  if (absl::Status s = weft::ckpt::WriteSafetensors(**reader, tensors, metadata, out); !s.ok()) {
    return Fail(s);
  }
  std::printf("wrote %s: %zu tensors from %s\n", out.c_str(), tensors.size(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  std::optional<std::string> arrays;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--arrays") {
      if (i + 1 >= argc) return UsageError("--arrays needs a value");
      arrays = argv[++i];
    } else if (absl::StartsWith(arg, "--arrays=")) {
      arrays = arg.substr(9);
    } else if (absl::StartsWith(arg, "-")) {
      return UsageError(absl::StrCat("unknown option ", arg));
    } else {
      args.push_back(arg);
    }
  }
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string& command = args[0];
  if (arrays && command != "export") return UsageError("--arrays is an option of export");
  if (arrays && absl::StrContains(absl::StrCat(",", *arrays, ","), ",,")) {
    return UsageError(absl::StrCat("--arrays \"", *arrays, "\" names an empty array"));
  }
  if ((command == "list" || command == "verify") && args.size() != 2) {
    return UsageError(absl::StrCat(command, " takes one directory"));
  }
  if (command == "list") return List(args[1]);
  if (command == "verify") return Verify(args[1]);
  if (command == "export") {
    if (args.size() != 3) return UsageError("export takes a directory and an output file");
    return Export(args[1], args[2], arrays.value_or("params"));
  }
  return UsageError(absl::StrCat("unknown command ", command));
}
