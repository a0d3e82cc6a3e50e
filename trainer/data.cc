#include "data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "rng.h"

namespace weft::trainer {
namespace {

constexpr size_t kChunk = 4096;

absl::Status AppendFile(const std::filesystem::path& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read corpus file ", path.string(), ": ", std::strerror(errno)));
  }
  out->insert(out->end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Corpus> LoadCorpus(const std::string& path, double val_fraction, int seq_len) {
  namespace fs = std::filesystem;
  Corpus corpus;
  corpus.source = path == "fortunes" ? std::string(kFortunesDir) : path;
  std::error_code ec;
  const fs::path root(corpus.source);
  std::vector<uint8_t> all;
  if (fs::is_directory(root, ec)) {
    std::vector<fs::path> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
      if (entry.is_symlink() || !entry.is_regular_file()) continue;
      if (entry.path().extension() == ".dat") continue;
      files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      if (absl::Status s = AppendFile(file, &all); !s.ok()) return s;
    }
  } else if (fs::is_regular_file(root, ec)) {
    if (absl::Status s = AppendFile(root, &all); !s.ok()) return s;
  } else {
    return absl::NotFoundError(absl::StrCat(
        "corpus ", corpus.source, " is neither a file nor a directory",
        path == "fortunes" ? " (install Debian's `fortunes` package: scripts/setup does)" : ""));
  }
  // Chunk c goes to validation when the running share floor(c · f) steps up.
  const size_t chunks = (all.size() + kChunk - 1) / kChunk;
  for (size_t c = 0; c < chunks; ++c) {
    const auto begin = all.begin() + static_cast<std::ptrdiff_t>(c * kChunk);
    const auto end =
        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), (c + 1) * kChunk));
    const bool val =
        static_cast<size_t>((c + 1) * val_fraction) > static_cast<size_t>(c * val_fraction);
    std::vector<uint8_t>& split = val ? corpus.val : corpus.train;
    split.insert(split.end(), begin, end);
  }
  const size_t need = static_cast<size_t>(seq_len) + 2;
  if (corpus.train.size() < need || corpus.val.size() < need) {
    return absl::InvalidArgumentError(
        absl::StrCat("corpus ", corpus.source, " is too small: ", all.size(), " bytes give ",
                     corpus.train.size(), " train and ", corpus.val.size(),
                     " validation bytes; each split "
                     "needs at least seq_len + 2 = ",
                     need));
  }
  return corpus;
}

void GatherTrainSamples(const std::vector<uint8_t>& data, uint64_t seed, uint64_t first, int n,
                        int T, uint8_t* tokens, uint8_t* targets) {
  const uint64_t range = data.size() - static_cast<uint64_t>(T) - 1;
  for (int j = 0; j < n; ++j) {
    const uint64_t offset = Mix64(Mix64(seed) ^ (first + j)) % range;
    std::memcpy(tokens + static_cast<size_t>(j) * T, data.data() + offset, T);
    std::memcpy(targets + static_cast<size_t>(j) * T, data.data() + offset + 1, T);
  }
}

void GatherValSample(const std::vector<uint8_t>& data, int k, int count, int T, uint8_t* tokens,
                     uint8_t* targets) {
  const uint64_t range = data.size() - static_cast<uint64_t>(T) - 1;
  const uint64_t offset = range * static_cast<uint64_t>(k) / static_cast<uint64_t>(count);
  std::memcpy(tokens, data.data() + offset, T);
  std::memcpy(targets, data.data() + offset + 1, T);
}

}  // namespace weft::trainer
