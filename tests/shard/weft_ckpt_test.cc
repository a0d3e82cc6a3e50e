// weft-ckpt run for real on checkpoints saved in process: list shows every tensor's shape and how
// it is sharded, verify passes and names a file with a flipped byte, export writes safetensors
// whose header and data match what was saved and refuses a corrupt checkpoint, and bad arguments
// exit 2.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "weft/comm/json.h"
#include "weft/kernels/hash.h"
#include "weft/shard/checkpoint.h"
#include "weft/shard/durable_file.h"

namespace weft::shard {
namespace {

using ::weft::testing::ProcessResult;
using ::weft::testing::RunProcess;
using ::weft::testing::TempDir;

ProcessResult Ckpt(std::vector<std::string> args) {
  args.insert(args.begin(), WEFT_CKPT);
  return RunProcess(args, {}, std::chrono::seconds(30));
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void FlipByte(const std::string& path, int64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x40));
}

// A safetensors file split into its parsed header and its data block.
struct Safetensors {
  uint64_t header_size = 0;
  JsonValue header;
  std::string data;
};

// The tensors' data lies back to back in header order and fills the data block.
void ExpectBackToBack(const Safetensors& file) {
  int64_t next = 0;
  for (size_t i = 0; i < file.header.names.size(); ++i) {
    if (file.header.names[i] == "__metadata__") continue;
    const JsonValue* offsets = file.header.values[i].Find("data_offsets");
    ASSERT_TRUE(offsets != nullptr && offsets->items.size() == 2) << file.header.names[i];
    EXPECT_EQ(offsets->items[0].integer, next) << file.header.names[i];
    next = offsets->items[1].integer;
  }
  EXPECT_EQ(static_cast<uint64_t>(next), file.data.size());
}

Safetensors ReadSafetensors(const std::string& path) {
  Safetensors out;
  std::string file;
  EXPECT_TRUE(ReadWholeFile(path, &file).ok()) << path;
  if (file.size() < 8) return out;
  for (int i = 7; i >= 0; --i) out.header_size = out.header_size << 8 | uint8_t(file[i]);
  EXPECT_LE(8 + out.header_size, file.size());
  absl::StatusOr<JsonValue> header = ParseJson(file.substr(8, out.header_size));
  EXPECT_TRUE(header.ok()) << header.status();
  if (header.ok()) out.header = *header;
  out.data = file.substr(8 + out.header_size);
  return out;
}

class WeftCkptTest : public ::testing::Test {
 protected:
  WeftCkptTest() {
    // Values encode (array, tensor, element).
    for (int a = 0; a < 2; ++a) {
      for (size_t t = 0; t < tensors_.size(); ++t) {
        values_[a].emplace_back(tensors_[t].elements());
        for (size_t i = 0; i < values_[a][t].size(); ++i) {
          values_[a][t][i] = static_cast<float>(1000 * a + 100 * t) + static_cast<float>(i) / 4;
        }
      }
    }
  }

  SavedPiece Piece(int t, uint64_t from, uint64_t count) const {
    return {t, from, count, {values_[0][t].data() + from, values_[1][t].data() + from}};
  }

  // wte cut into four uneven pieces, the others whole.
  std::string Save() const {
    const std::string dir = tmp_.path() + "/ckpt-42";
    const absl::Status s = SaveCheckpoint(
        nullptr, dir, {"params", "adam_m"}, tensors_,
        {Piece(0, 0, 5), Piece(1, 0, 5), Piece(0, 5, 11), Piece(0, 16, 8), Piece(0, 24, 8),
         Piece(2, 0, 1)},
        R"({"step": 42, "sample_rng": "00ff", "world": {"ranks": 1}})", absl::Seconds(10));
    EXPECT_TRUE(s.ok()) << s;
    return dir;
  }

  // The same checkpoint as four ranks would save it: rank r holds a quarter of wte, rank 0 the
  // rest. Written by hand (SaveCheckpoint needs a communicator for more than one rank).
  std::string SaveFourRanks() const {
    const std::string dir = tmp_.path() + "/four";
    std::filesystem::create_directories(dir);
    Manifest m;
    m.world = 4;
    m.arrays = {"params", "adam_m"};
    for (const TensorInfo& t : tensors_) m.tensors.push_back({t, {}});
    for (int r = 0; r < 4; ++r) {
      std::vector<SavedPiece> mine = {Piece(0, 8 * r, 8)};
      if (r == 0) mine.insert(mine.end(), {Piece(1, 0, 5), Piece(2, 0, 1)});
      std::string bytes;
      uint64_t at = 0;
      for (int a = 0; a < 2; ++a) {
        for (const SavedPiece& p : mine) {
          bytes.append(reinterpret_cast<const char*>(p.data[a]), p.count * sizeof(float));
          if (a > 0) continue;
          m.tensors[p.tensor].pieces.push_back({/*file=*/r, at, p.from, p.count});
          at += p.count;
        }
      }
      const std::string name = "rank-0000" + std::to_string(r) + ".bin";
      m.files.push_back({name, r, at, Checksum64(bytes.data(), bytes.size())});
      EXPECT_TRUE(WriteFileAtomically(dir + "/" + name, bytes).ok());
    }
    m.metadata = *ParseJson(R"({"step": 7})");
    EXPECT_TRUE(WriteFileAtomically(dir + "/manifest.json", ManifestJson(m)).ok());
    return dir;
  }

  // Checks that `file` holds tensor t of array a under `name`.
  void ExpectTensor(const Safetensors& file, const std::string& name, int a, size_t t) const {
    const JsonValue* entry = file.header.Find(name);
    ASSERT_NE(entry, nullptr) << name;
    const JsonValue* dtype = entry->Find("dtype");
    const JsonValue* shape = entry->Find("shape");
    const JsonValue* offsets = entry->Find("data_offsets");
    ASSERT_TRUE(dtype != nullptr && shape != nullptr && offsets != nullptr) << name;
    EXPECT_EQ(dtype->text, "F32") << name;
    std::vector<int64_t> dims;
    for (const JsonValue& d : shape->items) dims.push_back(d.integer);
    EXPECT_EQ(dims, tensors_[t].shape) << name;
    ASSERT_EQ(offsets->items.size(), 2u);
    const uint64_t begin = offsets->items[0].integer, end = offsets->items[1].integer;
    ASSERT_EQ(end - begin, tensors_[t].elements() * sizeof(float)) << name;
    ASSERT_LE(end, file.data.size()) << name;
    std::vector<float> got(tensors_[t].elements());
    std::memcpy(got.data(), file.data.data() + begin, end - begin);
    EXPECT_EQ(got, values_[a][t]) << name;
  }

  TempDir tmp_{"ckpt-tool"};
  const std::vector<TensorInfo> tensors_ = {
      {"wte", {8, 4}, "f32"}, {"ln_f.b", {5}, "f32"}, {"scale", {}, "f32"}};
  std::vector<std::vector<float>> values_[2];
};

TEST_F(WeftCkptTest, ListShowsTensorsShapesAndPieces) {
  const ProcessResult r = Ckpt({"list", Save()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* part :
       {"format:   weft-checkpoint, version 1", "world:    1 rank", "arrays:   params, adam_m",
        "  step: 42", "  sample_rng: \"00ff\"", "  world: {\"ranks\":1}", "rank-00000.bin",
        "wte     [8, 4]  f32          32  4 pieces: rank 0",
        "ln_f.b  [5]     f32           5  1 piece: rank 0",
        "scale   []      f32           1  1 piece: rank 0",
        "total: 3 tensors, 38 elements per array x 2 arrays, 304 bytes in 1 file"}) {
    EXPECT_TRUE(Has(r.output, part)) << part << " in\n" << r.output;
  }
}

TEST_F(WeftCkptTest, ListNamesTheRanksHoldingEachTensor) {
  const ProcessResult r = Ckpt({"list", SaveFourRanks()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r.output, "world:    4 ranks")) << r.output;
  EXPECT_TRUE(Has(r.output, "4 pieces: ranks 0-3")) << r.output;
  EXPECT_TRUE(Has(r.output, "1 piece: rank 0")) << r.output;
  EXPECT_TRUE(Has(r.output, "rank-00003.bin     3         8     64")) << r.output;
}

TEST_F(WeftCkptTest, VerifyPassesThenNamesTheFileWithAFlippedByte) {
  const std::string dir = SaveFourRanks();
  ProcessResult r = Ckpt({"verify", dir});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r.output, "rank-00002.bin: ok")) << r.output;
  EXPECT_TRUE(Has(r.output, "all 4 files verified")) << r.output;

  FlipByte(dir + "/rank-00002.bin", 37);
  r = Ckpt({"verify", dir});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "rank-00001.bin: ok")) << r.output;
  EXPECT_TRUE(Has(
      r.output, "rank-00002.bin: error: checkpoint " + dir + ": rank-00002.bin fails its checksum"))
      << r.output;
  EXPECT_TRUE(Has(r.output, "1 of 4 files fail verification")) << r.output;

  std::filesystem::resize_file(dir + "/rank-00003.bin", 10);
  r = Ckpt({"verify", dir});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "rank-00003.bin holds 10 bytes")) << r.output;
}

TEST_F(WeftCkptTest, ExportWritesTheParamsAsSafetensors) {
  const std::string dir = Save();
  const std::string out = tmp_.path() + "/model.safetensors";
  const ProcessResult r = Ckpt({"export", dir, out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  const Safetensors file = ReadSafetensors(out);
  EXPECT_EQ(file.header_size % 8, 0u);
  EXPECT_EQ(file.header.names,
            (std::vector<std::string>{"wte", "ln_f.b", "scale", "__metadata__"}));
  EXPECT_EQ(file.data.size(), 38 * sizeof(float));
  ExpectBackToBack(file);
  for (size_t t = 0; t < tensors_.size(); ++t) ExpectTensor(file, tensors_[t].name, 0, t);
  const JsonValue* metadata = file.header.Find("__metadata__");
  ASSERT_NE(metadata, nullptr);
  EXPECT_EQ(metadata->names, (std::vector<std::string>{"format", "step", "source"}));
  ASSERT_EQ(metadata->values.size(), 3u);
  EXPECT_EQ(JsonText(metadata->values[0]), "\"pt\"");
  EXPECT_EQ(JsonText(metadata->values[1]), "\"42\"");
  EXPECT_TRUE(std::filesystem::path(metadata->values[2].text).is_absolute());
  EXPECT_TRUE(std::filesystem::equivalent(metadata->values[2].text, dir));
}

TEST_F(WeftCkptTest, ExportOfOtherArraysPrefixesTheirNames) {
  for (const std::string& dir : {Save(), SaveFourRanks()}) {
    const std::string out = tmp_.path() + "/all.safetensors";
    ProcessResult r = Ckpt({"export", dir, out, "--arrays", "all"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    Safetensors file = ReadSafetensors(out);
    EXPECT_EQ(file.header.names.size(), 7u);
    EXPECT_EQ(file.data.size(), 2 * 38 * sizeof(float));
    ExpectBackToBack(file);
    for (size_t t = 0; t < tensors_.size(); ++t) {
      ExpectTensor(file, tensors_[t].name, 0, t);
      ExpectTensor(file, "adam_m." + tensors_[t].name, 1, t);
    }

    r = Ckpt({"export", "--arrays=adam_m", dir, out});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    file = ReadSafetensors(out);
    EXPECT_EQ(file.header.names, (std::vector<std::string>{"adam_m.wte", "adam_m.ln_f.b",
                                                           "adam_m.scale", "__metadata__"}));
    ExpectTensor(file, "adam_m.wte", 1, 0);
  }
}

TEST_F(WeftCkptTest, ExportStreamsATensorLargerThanOneRead) {
  // 1.2 M elements: more than the tool reads at once (1 Mi), in two pieces that end elsewhere.
  const TensorInfo big = {"big", {3, 400000}, "f32"};
  std::vector<float> values(big.elements());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) / 4;
  const std::string dir = tmp_.path() + "/big";
  const float* p = values.data();
  ASSERT_TRUE(SaveCheckpoint(nullptr, dir, {"params"}, {big},
                             {{0, 0, 500000, {p}}, {0, 500000, 700000, {p + 500000}}}, "{}",
                             absl::Seconds(10))
                  .ok());
  const std::string out = tmp_.path() + "/big.safetensors";
  const ProcessResult r = Ckpt({"export", dir, out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Safetensors file = ReadSafetensors(out);
  ExpectBackToBack(file);
  ASSERT_EQ(file.data.size(), values.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(file.data.data(), values.data(), file.data.size()), 0);
}

TEST_F(WeftCkptTest, ExportRefusesACorruptCheckpointAndUnknownArrays) {
  const std::string dir = Save();
  const std::string out = tmp_.path() + "/x.safetensors";
  ProcessResult r = Ckpt({"export", dir, out, "--arrays", "adam_v"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "has no array \"adam_v\" (it has params, adam_m)")) << r.output;

  FlipByte(dir + "/rank-00000.bin", 200);
  r = Ckpt({"export", dir, out});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "rank-00000.bin fails its checksum; nothing exported")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

TEST_F(WeftCkptTest, BadArgumentsExitTwoAndMissingCheckpointsOne) {
  ProcessResult r = Ckpt({});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Has(r.output, "Usage: weft-ckpt list DIR")) << r.output;
  r = Ckpt({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r.output, "Usage:")) << r.output;
  const std::vector<std::vector<std::string>> bad = {{"frobnicate", "x"},
                                                     {"list"},
                                                     {"list", "a", "b"},
                                                     {"verify", "-x", "a"},
                                                     {"export", "a"},
                                                     {"export", "a", "b", "--arrays"},
                                                     {"export", "a", "b", "--arrays", "params,"},
                                                     {"list", "a", "--arrays", "all"}};
  for (const std::vector<std::string>& args : bad) {
    r = Ckpt(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << "\n" << r.output;
    EXPECT_TRUE(Has(r.output, "Usage:")) << r.output;
  }
  r = Ckpt({"list", tmp_.path() + "/none"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r.output, "has no manifest.json")) << r.output;
}

}  // namespace
}  // namespace weft::shard
