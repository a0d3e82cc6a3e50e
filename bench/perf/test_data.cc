#include "perf/test_data.h"

#include <cstring>

#include "common/expected_values.h"
#include "weft/kernels/hash.h"

namespace weft::perf {
namespace {

// A distinct value per (seed, rank, index), as an integer `type` represents exactly: integer
// types take all the bits (Store wraps), floating types a signed range within their significand.
int64_t MovementValue(DataType type, uint64_t seed, int rank, uint64_t index) {
  const uint64_t x = Mix64(Mix64(seed * kFnvPrime + static_cast<uint64_t>(rank)) ^ index);
  const auto centered = [x](int bits) {
    return static_cast<int64_t>(x & ((uint64_t{1} << bits) - 1)) - (int64_t{1} << (bits - 1));
  };
  switch (type) {
    case DataType::kFloat16:
      return centered(11);
    case DataType::kBFloat16:
      return centered(9);
    case DataType::kFloat32:
      return centered(24);
    case DataType::kFloat64:
      return centered(53);
    default:
      return static_cast<int64_t>(x);
  }
}

// Reduction inputs are indexed from a seed-dependent origin so each check sees other values.
uint64_t ReductionIndex(uint64_t seed, uint64_t index) { return seed * 7919 + index; }

}  // namespace

TestData::TestData(DataType type, ReduceOp op, bool reduces, int ranks, uint64_t seed)
    : type_(type),
      op_(op),
      reduces_(reduces),
      ranks_(ranks),
      seed_(seed),
      element_size_(SizeOf(type)) {}

void TestData::StoreInput(int rank, uint64_t index, void* out) const {
  const int64_t value = reduces_
                            ? testing::InputValue(type_, op_, rank, ReductionIndex(seed_, index))
                            : MovementValue(type_, seed_, rank, index);
  testing::Store(type_, value, out);
}

void TestData::StoreExpected(int source_rank, uint64_t index, void* out) const {
  if (source_rank == Block::kReduced) {
    testing::StoreExpected(type_, op_, ranks_, ReductionIndex(seed_, index), out);
  } else {
    StoreInput(source_rank, index, out);
  }
}

void TestData::FillInput(int rank, void* data, size_t count) const {
  auto* bytes = static_cast<std::byte*>(data);
  for (size_t i = 0; i < count; ++i) StoreInput(rank, i, bytes + i * element_size_);
}

int64_t TestData::CountWrong(const void* recv, const Block& block) const {
  const auto* got = static_cast<const std::byte*>(recv) + block.recv_offset * element_size_;
  std::byte want[8];
  int64_t wrong = 0;
  for (size_t i = 0; i < block.count; ++i) {
    StoreExpected(block.source_rank, block.source_index + i, want);
    if (std::memcmp(want, got + i * element_size_, element_size_) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace weft::perf
