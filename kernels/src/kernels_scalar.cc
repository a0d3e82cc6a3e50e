// The portable kernels: the reference semantics (element.h) as plain loops, used where the CPU
// has no AVX2 and as the definition the SIMD levels are tested against.

#include "element.h"
#include "integer_divide.h"
#include "kernel_table.h"

namespace weft::kernels_internal {
namespace {

template <typename E, typename Op>
void BinaryLoop(void* dst, const void* a, const void* b, size_t count) {
  using S = typename E::Storage;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (size_t i = 0; i < count; ++i) {
    d[i] = E::Store(Op::Apply(E::Load(x[i]), E::Load(y[i])));
  }
}

template <typename E, typename Op>
void ManyLoop(void* dst, const void* const* srcs, int n, size_t count) {
  using S = typename E::Storage;
  auto* d = static_cast<S*>(dst);
  for (size_t i = 0; i < count; ++i) {
    auto acc = E::Load(static_cast<const S*>(srcs[0])[i]);
    for (int k = 1; k < n; ++k) acc = Op::Apply(acc, E::Load(static_cast<const S*>(srcs[k])[i]));
    d[i] = E::Store(acc);
  }
}

template <typename E>
void DivideFloatLoop(void* data, size_t count, int divisor) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  auto* d = static_cast<S*>(data);
  const C by = static_cast<C>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] = E::Store(E::Load(d[i]) / by);
}

template <DataType kType>
constexpr void FillRow(KernelTable& table) {
  using E = ElementFor<kType>;
  constexpr int t = static_cast<int>(kType);
  table.binary[t][0] = &BinaryLoop<E, SumOp>;
  table.binary[t][1] = &BinaryLoop<E, ProdOp>;
  table.binary[t][2] = &BinaryLoop<E, MinOp>;
  table.binary[t][3] = &BinaryLoop<E, MaxOp>;
  table.many[t][0] = &ManyLoop<E, SumOp>;
  table.many[t][1] = &ManyLoop<E, ProdOp>;
  table.many[t][2] = &ManyLoop<E, MinOp>;
  table.many[t][3] = &ManyLoop<E, MaxOp>;
  // Portable code has no non-temporal stores.
  for (int op = 0; op < kNumCombineOps; ++op) {
    table.binary_streaming[t][op] = table.binary[t][op];
    table.many_streaming[t][op] = table.many[t][op];
  }
}

void HalfToFloatLoop(const uint16_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = HalfBitsToFloat(src[i]);
}
void FloatToHalfLoop(const float* src, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = FloatToHalfBits(src[i]);
}
void BFloat16ToFloatLoop(const uint16_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = BFloat16BitsToFloat(src[i]);
}
void FloatToBFloat16Loop(const float* src, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = FloatToBFloat16Bits(src[i]);
}

constexpr KernelTable MakeTable() {
  KernelTable table{};
  FillRow<DataType::kInt8>(table);
  FillRow<DataType::kUint8>(table);
  FillRow<DataType::kInt32>(table);
  FillRow<DataType::kUint32>(table);
  FillRow<DataType::kInt64>(table);
  FillRow<DataType::kUint64>(table);
  FillRow<DataType::kFloat16>(table);
  FillRow<DataType::kBFloat16>(table);
  FillRow<DataType::kFloat32>(table);
  FillRow<DataType::kFloat64>(table);
  table.divide[static_cast<int>(DataType::kInt8)] = &DivideInt8;
  table.divide[static_cast<int>(DataType::kUint8)] = &DivideUint8;
  table.divide[static_cast<int>(DataType::kInt32)] = &DivideInt32;
  table.divide[static_cast<int>(DataType::kUint32)] = &DivideUint32;
  table.divide[static_cast<int>(DataType::kInt64)] = &DivideInt64;
  table.divide[static_cast<int>(DataType::kUint64)] = &DivideUint64;
  table.divide[static_cast<int>(DataType::kFloat16)] = &DivideFloatLoop<HalfElement>;
  table.divide[static_cast<int>(DataType::kBFloat16)] = &DivideFloatLoop<BFloat16Element>;
  table.divide[static_cast<int>(DataType::kFloat32)] = &DivideFloatLoop<PlainElement<float>>;
  table.divide[static_cast<int>(DataType::kFloat64)] = &DivideFloatLoop<PlainElement<double>>;
  table.half_to_float = &HalfToFloatLoop;
  table.float_to_half = &FloatToHalfLoop;
  table.bfloat16_to_float = &BFloat16ToFloatLoop;
  table.float_to_bfloat16 = &FloatToBFloat16Loop;
  return table;
}

}  // namespace

constinit const KernelTable kScalarKernels = MakeTable();

}  // namespace weft::kernels_internal
