#include "feedback_file.h"

#include <cstdint>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "weft/kernels/hash.h"
#include "weft/shard/durable_file.h"

namespace weft::trainer {
namespace {

constexpr char kMagic[8] = {'w', 'e', 'f', 't', '-', 'e', 'f', '1'};
constexpr size_t kHeader = sizeof(kMagic) + 2 * sizeof(uint64_t);

}  // namespace

std::string FeedbackPath(const std::string& checkpoint_dir, int rank) {
  return absl::StrFormat("%s/compression-rank-%05d.bin", checkpoint_dir, rank);
}

absl::Status WriteFeedback(const std::string& path, const std::vector<float>& errors) {
  const uint64_t count = errors.size();
  const uint64_t sum = Checksum64(errors.data(), count * sizeof(float));
  std::string data(kHeader + count * sizeof(float), '\0');
  std::memcpy(data.data(), kMagic, sizeof(kMagic));
  std::memcpy(data.data() + sizeof(kMagic), &count, sizeof(count));
  std::memcpy(data.data() + sizeof(kMagic) + sizeof(count), &sum, sizeof(sum));
  if (count > 0) std::memcpy(data.data() + kHeader, errors.data(), count * sizeof(float));
  return shard::WriteFileAtomically(path, data);
}

absl::StatusOr<std::vector<float>> ReadFeedback(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no error-feedback state"));
  }
  std::string data;
  if (absl::Status s = shard::ReadWholeFile(path, &data); !s.ok()) return s;
  uint64_t count = 0, sum = 0;
  if (data.size() >= kHeader) {
    std::memcpy(&count, data.data() + sizeof(kMagic), sizeof(count));
    std::memcpy(&sum, data.data() + sizeof(kMagic) + sizeof(count), sizeof(sum));
  }
  if (data.size() < kHeader || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0 ||
      data.size() != kHeader + count * sizeof(float) ||
      Checksum64(data.data() + kHeader, count * sizeof(float)) != sum) {
    return absl::DataLossError(absl::StrCat(path, ": not a whole error-feedback file (",
                                            data.size(),
                                            " bytes; a foreign, truncated or corrupted file)"));
  }
  std::vector<float> errors(count);
  if (count > 0) std::memcpy(errors.data(), data.data() + kHeader, count * sizeof(float));
  return errors;
}

}  // namespace weft::trainer
