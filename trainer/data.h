// Corpus and sampler: the bytes a run trains on and which of them each step reads.
//
// The corpus is one text file or every regular file of a directory (sorted by name; symbolic
// links and fortune's .dat index files skipped), concatenated. It is cut into 4 KiB chunks and
// a val_fraction share of them, spread evenly, forms the validation split, so both splits see
// every topic.
//
// Sampling is stateless: sample i of the run (i = step · batch_size + position in the global
// batch) starts at an offset that is a hash of (seed, i). The position of a rank's sequences in
// the global batch is (micro_step · ranks + rank) · micro_batch + j, so the global batch is the
// same set of sequences for every rank count and accumulation, and the data cursor a checkpoint
// needs is just the step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::trainer {

// The directory the Debian/Ubuntu `fortunes` packages install to: the default corpus.
inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

struct Corpus {
  std::string source;  // what was loaded, for messages
  std::vector<uint8_t> train;
  std::vector<uint8_t> val;
};

// `path` is a file or a directory; "fortunes" means kFortunesDir. Each split must hold more than
// seq_len + 1 bytes.
absl::StatusOr<Corpus> LoadCorpus(const std::string& path, double val_fraction, int seq_len);

// Fills tokens[n·T .. n·T+T) and targets (shifted by one) for samples first .. first + n - 1.
void GatherTrainSamples(const std::vector<uint8_t>& data, uint64_t seed, uint64_t first, int n,
                        int T, uint8_t* tokens, uint8_t* targets);

// Validation sequence k of `count` evenly spaced ones (a fixed set, independent of the step).
void GatherValSample(const std::vector<uint8_t>& data, int k, int count, int T, uint8_t* tokens,
                     uint8_t* targets);

}  // namespace weft::trainer
