// Sharded checkpoints: every rank writes its own pieces of named tensors in parallel; a manifest,
// written last, says where every element lies; a reader at any other layout reads any range of
// any tensor, so a checkpoint saved on 4 ranks under ZeRO-3 loads on 1, 2 or 3 ranks under any
// stage with no converter.
//
//   // Every rank, collectively: the pieces it holds (its ZeRO slices, or a share of a replica).
//   std::vector<weft::shard::SavedPiece> mine = {{/*tensor=*/0, /*from=*/0, 4096, {p, m, v}}};
//   absl::Status s = weft::shard::SaveCheckpoint(comm, "run/ckpt-00000100",
//                                                {"params", "adam_m", "adam_v"}, tensors, mine,
//                                                R"({"step": 100})", absl::Seconds(120));
//   auto reader = weft::shard::CheckpointReader::Open("run/ckpt-00000100");
//   (*reader)->Verify();                                    // every file's checksum
//   (*reader)->Read(reader->FindTensor("wte"), 0, 0, n, out);   // any range of any tensor
//
// A checkpoint is a directory:
//   rank-RRRRR.bin  one per rank that saved anything: raw little-endian float32, for each array in
//                   turn (e.g. the parameters, then Adam's first moment, then its second) the
//                   rank's pieces back to back, in the order it passed them. numpy.fromfile reads
//                   it.
//   manifest.json   the arrays; the files with their element counts (per array) and checksums
//                   (kernels/hash.h's Checksum64 of the whole file, in hex); every tensor's name,
//                   shape, dtype and pieces [file, at, from, count] (elements [from, from + count)
//                   of the tensor are at element `at` of each array's section of that file); and
//                   the caller's metadata object (step, RNG, config, world layout).
// Saving writes DIR.tmp, fsyncs every file, has rank 0 write the manifest into it last, and
// renames DIR.tmp to DIR: a directory named DIR is always complete, and a crash leaves at most a
// DIR.tmp that the caller removes. Every tensor's pieces must tile it exactly once across the
// ranks; Save checks this before anything is committed and the reader checks it again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"
#include "weft/comm/json.h"

namespace weft::shard {

// A tensor as a checkpoint names it: row-major, float32 ("f32", the one dtype so far).
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "f32";
  uint64_t elements() const;
  bool operator==(const TensorInfo&) const = default;
};

// Elements [from, from + count) of tensors[tensor], which this rank saves: data[a] points at them
// in array a (one pointer per array).
struct SavedPiece {
  int tensor = 0;
  uint64_t from = 0;
  uint64_t count = 0;
  std::vector<const float*> data;
};

// Where a piece of a tensor lies: elements [from, from + count) of the tensor are at element `at`
// of every array's section of files[file].
struct PieceRecord {
  int file = 0;
  uint64_t at = 0;
  uint64_t from = 0;
  uint64_t count = 0;
  bool operator==(const PieceRecord&) const = default;
};

struct CheckpointFile {
  std::string name;       // relative to the checkpoint directory
  int rank = 0;           // the rank that wrote it
  uint64_t elements = 0;  // per array
  uint64_t checksum = 0;  // Checksum64 of the whole file
};

struct ManifestTensor {
  TensorInfo info;
  std::vector<PieceRecord> pieces;  // ordered by `from`, tiling the tensor
};

struct Manifest {
  int world = 1;                    // ranks that saved the checkpoint
  std::vector<std::string> arrays;  // e.g. "params", "adam_m", "adam_v"
  std::vector<CheckpointFile> files;
  std::vector<ManifestTensor> tensors;
  JsonValue metadata;  // the caller's object
};

// Collective over `comm` (null: a single process). Writes the checkpoint directory `dir`, which
// must not exist yet (a stale `dir`.tmp is replaced). Every rank passes the same `arrays`,
// `tensors` and `metadata_json` (a JSON object; rank 0's is written) and its own pieces, possibly
// none. Errors: pieces outside their tensor, overlapping or leaving a gap (naming the tensor and
// the ranks), I/O failures on any rank (every rank returns the first, naming the rank), `dir`
// existing. On error nothing named `dir` is created.
absl::Status SaveCheckpoint(Communicator* comm, const std::string& dir,
                            const std::vector<std::string>& arrays,
                            const std::vector<TensorInfo>& tensors,
                            const std::vector<SavedPiece>& mine, const std::string& metadata_json,
                            absl::Duration timeout);

// The manifest's JSON text for `manifest` (SaveCheckpoint writes it; exposed for tools and tests).
std::string ManifestJson(const Manifest& manifest);
// Parses and validates a manifest: fields and types, pieces inside their files and tiling their
// tensors. Errors (DataLoss) say what is wrong.
absl::StatusOr<Manifest> ParseManifest(const std::string& text);

class CheckpointReader {
 public:
  // Reads DIR/manifest.json and opens the files it names, checking their sizes. Reads no data.
  // Errors: NotFound when there is no manifest; DataLoss for a corrupt manifest or a missing or
  // wrong-sized file (naming it).
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& dir);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  // The index of a tensor or array by name, or -1.
  int FindTensor(const std::string& name) const;
  int FindArray(const std::string& name) const;

  // Reads whole files and compares their checksums: those whose index is `first` modulo `stride`
  // (ranks split the work: Verify(rank, world)). DataLoss names the first file that differs.
  absl::Status Verify(int first = 0, int stride = 1) const;
  // Elements [from, from + count) of tensor `tensor`'s array `array` into `out`.
  absl::Status Read(int tensor, int array, uint64_t from, uint64_t count, float* out) const;

 private:
  CheckpointReader() = default;

  std::string dir_;
  Manifest manifest_;
  std::vector<int> fds_;  // per file
};

}  // namespace weft::shard
