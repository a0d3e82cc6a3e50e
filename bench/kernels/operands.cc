#include "operands.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_bench.h"
#include "weft/kernels/convert.h"

namespace weft::kernel_bench {
namespace {

// Values repeat with this period (in elements), so an array is its first period copied over and
// over: filling a 64 MiB operand costs a memcpy, not a conversion per element.
constexpr size_t kPeriod = 4096;

// Digits of the significand of a floating-point type; 0 for integers.
int SignificandDigits(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 11;
    case DataType::kBFloat16:
      return 8;
    case DataType::kFloat32:
      return 24;
    case DataType::kFloat64:
      return 53;
    default:
      return 0;
  }
}

// k + 1/2 + j/8192 for an integer k in [-125, 125]: the fraction is in [1/2, 1), so the value is
// never closer to zero than 1/8192 (j < kPeriod).
double Varied(size_t j) {
  return static_cast<double>((j * 37) % 251) - 125.0 + 0.5 + static_cast<double>(j) / 8192.0;
}

enum class Role { kAccumulator, kIncrement };

// See the top of operands.h.
double Value(DataType type, ReduceOp op, Role role, size_t j) {
  const int digits = SignificandDigits(type);
  if (digits == 0 || op == ReduceOp::kMin || op == ReduceOp::kMax) return Varied(j);
  const double sign = j % 3 == 0 ? -1.0 : 1.0;
  const double spread = 1.0 + static_cast<double>(j % 16) / 16.0;
  if (op == ReduceOp::kProd) return role == Role::kAccumulator ? sign * spread : sign;
  return role == Role::kAccumulator ? sign * std::ldexp(spread, digits)
                                    : sign * (0.25 + static_cast<double>(j % 8) / 64.0);
}

// Integers take the truncated value, modulo 2^bits (the conversion to int64_t first keeps the
// negative values of the unsigned types defined).
void Store(DataType type, void* base, size_t i, double v) {
  switch (type) {
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      return;
    case DataType::kUint8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      return;
    case DataType::kUint32:
      static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(static_cast<int64_t>(v));
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      return;
    case DataType::kUint64:
      static_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(static_cast<int64_t>(v));
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToBFloat16(static_cast<float>(v));
      return;
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      return;
  }
}

// Stores value(j) for the first period of `count` elements, then repeats it to the end.
template <typename ValueFn>
void FillPeriodic(DataType type, void* data, size_t count, ValueFn value) {
  const size_t first = count < kPeriod ? count : kPeriod;
  for (size_t j = 0; j < first; ++j) Store(type, data, j, value(j));
  auto* bytes = static_cast<std::byte*>(data);
  const size_t total = count * SizeOf(type);
  // Doubling the filled prefix keeps it a whole number of periods until the last, partial copy.
  for (size_t filled = first * SizeOf(type); filled < total;) {
    const size_t chunk = filled < total - filled ? filled : total - filled;
    std::memcpy(bytes + filled, bytes, chunk);
    filled += chunk;
  }
}

}  // namespace

void FillVaried(DataType type, void* data, size_t count) {
  FillPeriodic(type, data, count, Varied);
}

ReduceOperands::ReduceOperands(DataType type, ReduceOp op, size_t bytes, int sources,
                               bool accumulate, int slots) {
  const size_t array_bytes = bytes * static_cast<size_t>(slots);
  const size_t array_count = array_bytes / SizeOf(type);
  arrays_.reserve(static_cast<size_t>(sources) + 1);
  for (int k = 0; k <= sources; ++k) {
    PageBuffer& array = arrays_.emplace_back(array_bytes);
    if (array.data() == nullptr) {
      ok_ = false;
      return;
    }
    if (k == 0 && !accumulate) continue;  // A separate output stays zero: no kernel reads it.
    const bool accumulator = accumulate ? k == 0 : k == 1;
    const Role role = accumulator ? Role::kAccumulator : Role::kIncrement;
    FillPeriodic(type, array.data(), array_count,
                 [&](size_t j) { return Value(type, op, role, j); });
  }
  source_pointers_.resize(static_cast<size_t>(slots));
  for (int position : RotationOrder(slots)) {
    const size_t offset = static_cast<size_t>(position) * bytes;
    std::vector<const void*>& pointers = source_pointers_[slots_.size()];
    for (int k = 1; k <= sources; ++k) pointers.push_back(arrays_[k].data() + offset);
    slots_.push_back(Slot{arrays_[0].data() + offset, pointers.data()});
  }
}

}  // namespace weft::kernel_bench
