// Loop skeletons shared by the SIMD levels, written once over a "lane traits" type L:
//
//   L::Storage                      the element type in memory
//   L::Reg                          the register an element block is computed in
//   L::kLanes                       elements per register
//   L::Load(p) / L::Store(p, r)     a whole block (unaligned)
//   L::StoreStream(p, r)            a whole block with a non-temporal store; p is aligned to
//                                   kLanes * sizeof(Storage)
//   L::LoadPartial(p, n) / L::StorePartial(p, r, n)
//                                   the first n < kLanes elements; never touch memory beyond them
//   L::Sum, L::Prod, L::Min, L::Max (Reg, Reg) -> Reg, with the semantics of element.h
//
// Each SIMD translation unit defines its traits in an anonymous namespace and instantiates these
// templates with them, so every instantiation has internal linkage and carries that unit's target
// flags. This header must hold templates only: a non-template inline function here would be
// emitted by several units compiled for different instruction sets.
//
// MakeTable builds a level's whole KernelTable from its traits, so every level maps data types to
// loops alike and a level differs from another only in its traits (and its 32-bit division).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "integer_divide.h"
#include "kernel_table.h"

namespace weft::kernels_internal::simd {

struct SumOp {
  template <typename L>
  static typename L::Reg Apply(typename L::Reg a, typename L::Reg b) {
    return L::Sum(a, b);
  }
};
struct ProdOp {
  template <typename L>
  static typename L::Reg Apply(typename L::Reg a, typename L::Reg b) {
    return L::Prod(a, b);
  }
};
struct MinOp {
  template <typename L>
  static typename L::Reg Apply(typename L::Reg a, typename L::Reg b) {
    return L::Min(a, b);
  }
};
struct MaxOp {
  template <typename L>
  static typename L::Reg Apply(typename L::Reg a, typename L::Reg b) {
    return L::Max(a, b);
  }
};

// Four independent registers per step keep several loads in flight, which is what it takes for
// a streaming loop to approach memory bandwidth. The loops over them carry `#pragma GCC unroll`
// (which takes a literal, hence the assertion) so that the registers never live in memory.
inline constexpr size_t kUnroll = 4;
static_assert(kUnroll == 4, "the unroll pragmas below must match kUnroll");

template <typename L, bool kStream>
void Put(typename L::Storage* p, typename L::Reg r) {
  if constexpr (kStream) {
    L::StoreStream(p, r);
  } else {
    L::Store(p, r);
  }
}

// How many leading elements (fewer than kLanes) keep d from being aligned to the register width,
// or kUnalignable when d is not even aligned to its element size. The loops below handle that
// head as a partial block and then store whole blocks aligned: stores that split cache lines
// halve the throughput of cache-resident reductions, and StoreStream requires alignment.
inline constexpr size_t kUnalignable = ~size_t{0};
template <typename L>
size_t HeadBeforeAlignment(const typename L::Storage* d) {
  constexpr size_t kElement = sizeof(typename L::Storage);
  constexpr size_t kBlock = kElement * L::kLanes;
  const size_t misalignment = reinterpret_cast<uintptr_t>(d) % kBlock;
  if (misalignment == 0) return 0;
  if (misalignment % kElement != 0) return kUnalignable;
  return (kBlock - misalignment) / kElement;
}

// Whole registers of dst = a (op) b; returns how many elements it covered.
template <typename L, typename Op, bool kStream>
size_t BinaryBlocks(typename L::Storage* d, const typename L::Storage* x,
                    const typename L::Storage* y, size_t count) {
  using R = typename L::Reg;
  constexpr size_t kLanes = L::kLanes;
  size_t i = 0;
  for (; i + kUnroll * kLanes <= count; i += kUnroll * kLanes) {
    R r[kUnroll];
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) {
      r[u] = Op::template Apply<L>(L::Load(x + i + u * kLanes), L::Load(y + i + u * kLanes));
    }
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) Put<L, kStream>(d + i + u * kLanes, r[u]);
  }
  for (; i + kLanes <= count; i += kLanes) {
    Put<L, kStream>(d + i, Op::template Apply<L>(L::Load(x + i), L::Load(y + i)));
  }
  return i;
}

// Fewer than kLanes elements of dst = a (op) b.
template <typename L, typename Op>
void BinaryPartial(typename L::Storage* d, const typename L::Storage* x,
                   const typename L::Storage* y, size_t n) {
  if (n == 0) return;
  L::StorePartial(d, Op::template Apply<L>(L::LoadPartial(x, n), L::LoadPartial(y, n)), n);
}

// kStream: dst is disjoint from the sources and too large to stay in cache, so whole blocks are
// written with non-temporal stores (no read-for-ownership of dst), fenced before returning so
// that a later release store (a flag another process polls) orders after them. A dst that cannot
// be aligned falls back to plain stores.
template <typename L, typename Op, bool kStream>
void BinaryLoop(void* dst, const void* a, const void* b, size_t count) {
  using S = typename L::Storage;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  const size_t head = HeadBeforeAlignment<L>(d);
  size_t i;
  if (head < count) {
    BinaryPartial<L, Op>(d, x, y, head);
    i = head + BinaryBlocks<L, Op, kStream>(d + head, x + head, y + head, count - head);
    if (kStream) _mm_sfence();
  } else {
    i = BinaryBlocks<L, Op, false>(d, x, y, count);
  }
  BinaryPartial<L, Op>(d + i, x + i, y + i, count - i);
}

// Whole registers of dst = srcs[0] (op) ... (op) srcs[n-1], starting at element `from`; returns
// the element after the last one covered. One pass over every source: each block is accumulated
// in registers across all sources and stored once, so dst is written once and (for fp16/bf16)
// rounded once.
template <typename L, typename Op, bool kStream>
size_t ManyBlocks(typename L::Storage* d, const void* const* srcs, int n, size_t from,
                  size_t count) {
  using S = typename L::Storage;
  using R = typename L::Reg;
  constexpr size_t kLanes = L::kLanes;
  const auto* first = static_cast<const S*>(srcs[0]);
  size_t i = from;
  for (; i + kUnroll * kLanes <= count; i += kUnroll * kLanes) {
    R acc[kUnroll];
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) acc[u] = L::Load(first + i + u * kLanes);
    for (int k = 1; k < n; ++k) {
      const auto* src = static_cast<const S*>(srcs[k]) + i;
#pragma GCC unroll 4
      for (size_t u = 0; u < kUnroll; ++u) {
        acc[u] = Op::template Apply<L>(acc[u], L::Load(src + u * kLanes));
      }
    }
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) Put<L, kStream>(d + i + u * kLanes, acc[u]);
  }
  for (; i + kLanes <= count; i += kLanes) {
    R acc = L::Load(first + i);
    for (int k = 1; k < n; ++k) {
      acc = Op::template Apply<L>(acc, L::Load(static_cast<const S*>(srcs[k]) + i));
    }
    Put<L, kStream>(d + i, acc);
  }
  return i;
}

// Elements [from, from + rest) with rest < kLanes.
template <typename L, typename Op>
void ManyPartial(typename L::Storage* d, const void* const* srcs, int n, size_t from, size_t rest) {
  using S = typename L::Storage;
  if (rest == 0) return;
  typename L::Reg acc = L::LoadPartial(static_cast<const S*>(srcs[0]) + from, rest);
  for (int k = 1; k < n; ++k) {
    acc = Op::template Apply<L>(acc, L::LoadPartial(static_cast<const S*>(srcs[k]) + from, rest));
  }
  L::StorePartial(d + from, acc, rest);
}

template <typename L, typename Op, bool kStream>
void ManyLoop(void* dst, const void* const* srcs, int n, size_t count) {
  auto* d = static_cast<typename L::Storage*>(dst);
  const size_t head = HeadBeforeAlignment<L>(d);
  size_t i;
  if (head < count) {
    ManyPartial<L, Op>(d, srcs, n, 0, head);
    i = ManyBlocks<L, Op, kStream>(d, srcs, n, head, count);
    if (kStream) _mm_sfence();
  } else {
    i = ManyBlocks<L, Op, false>(d, srcs, n, 0, count);
  }
  ManyPartial<L, Op>(d, srcs, n, i, count - i);
}

// dst[i] = Out::Store(f(In::Load(src[i]))): conversions and DivideBy. In and Out share Reg and
// kLanes; src and dst are the same buffer or disjoint. Like the loops above, dst is aligned first.
template <typename In, typename Out, typename F>
void MapLoop(const typename In::Storage* src, typename Out::Storage* dst, size_t count, F f) {
  using R = typename In::Reg;
  constexpr size_t kLanes = In::kLanes;
  static_assert(kLanes == Out::kLanes);
  auto partial = [&](size_t from, size_t n) {
    if (n != 0) Out::StorePartial(dst + from, f(In::LoadPartial(src + from, n)), n);
  };
  const size_t head = HeadBeforeAlignment<Out>(dst);
  size_t i = head < count ? head : 0;
  partial(0, i);
  for (; i + kUnroll * kLanes <= count; i += kUnroll * kLanes) {
    R r[kUnroll];
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) r[u] = f(In::Load(src + i + u * kLanes));
#pragma GCC unroll 4
    for (size_t u = 0; u < kUnroll; ++u) Out::Store(dst + i + u * kLanes, r[u]);
  }
  for (; i + kLanes <= count; i += kLanes) Out::Store(dst + i, f(In::Load(src + i)));
  partial(i, count - i);
}

// data[i] /= divisor for floating-point lanes, which add L::Splat(int) and L::Div(Reg, Reg).
template <typename L>
void DivideFloat(void* data, size_t count, int divisor) {
  auto* d = static_cast<typename L::Storage*>(data);
  const typename L::Reg by = L::Splat(divisor);
  MapLoop<L, L>(d, d, count, [by](typename L::Reg x) { return L::Div(x, by); });
}

// fp16/bf16 <-> fp32: In's Load widens and Out's Store narrows (rounding to nearest even), so the
// loop itself only moves registers.
template <typename In, typename Out>
void ConvertLoop(const typename In::Storage* src, typename Out::Storage* dst, size_t count) {
  MapLoop<In, Out>(src, dst, count, [](typename In::Reg x) { return x; });
}

// One data type's reductions: every operator, with plain and with streaming stores.
template <typename L>
constexpr void FillReduceRow(KernelTable& table, int type) {
  table.binary[type][0] = &BinaryLoop<L, SumOp, false>;
  table.binary[type][1] = &BinaryLoop<L, ProdOp, false>;
  table.binary[type][2] = &BinaryLoop<L, MinOp, false>;
  table.binary[type][3] = &BinaryLoop<L, MaxOp, false>;
  table.many[type][0] = &ManyLoop<L, SumOp, false>;
  table.many[type][1] = &ManyLoop<L, ProdOp, false>;
  table.many[type][2] = &ManyLoop<L, MinOp, false>;
  table.many[type][3] = &ManyLoop<L, MaxOp, false>;
  table.binary_streaming[type][0] = &BinaryLoop<L, SumOp, true>;
  table.binary_streaming[type][1] = &BinaryLoop<L, ProdOp, true>;
  table.binary_streaming[type][2] = &BinaryLoop<L, MinOp, true>;
  table.binary_streaming[type][3] = &BinaryLoop<L, MaxOp, true>;
  table.many_streaming[type][0] = &ManyLoop<L, SumOp, true>;
  table.many_streaming[type][1] = &ManyLoop<L, ProdOp, true>;
  table.many_streaming[type][2] = &ManyLoop<L, MinOp, true>;
  table.many_streaming[type][3] = &ManyLoop<L, MaxOp, true>;
}

// A level's table. `Lanes` holds its traits per data type: Int8, Uint8, Int32, Uint32, Int64,
// Uint64, Half, BFloat16, Float32 and Float64, the floating-point ones with Splat and Div. The 8-
// and 64-bit integers divide with the portable integer_divide.h at every level (it beats a SIMD
// loop without a vector divide); 32-bit ones with the level's own `divide_int32` and
// `divide_uint32`.
template <typename Lanes>
constexpr KernelTable MakeTable(DivideFn divide_int32, DivideFn divide_uint32) {
  auto at = [](DataType type) { return static_cast<int>(type); };
  KernelTable table{};
  FillReduceRow<typename Lanes::Int8>(table, at(DataType::kInt8));
  FillReduceRow<typename Lanes::Uint8>(table, at(DataType::kUint8));
  FillReduceRow<typename Lanes::Int32>(table, at(DataType::kInt32));
  FillReduceRow<typename Lanes::Uint32>(table, at(DataType::kUint32));
  FillReduceRow<typename Lanes::Int64>(table, at(DataType::kInt64));
  FillReduceRow<typename Lanes::Uint64>(table, at(DataType::kUint64));
  FillReduceRow<typename Lanes::Half>(table, at(DataType::kFloat16));
  FillReduceRow<typename Lanes::BFloat16>(table, at(DataType::kBFloat16));
  FillReduceRow<typename Lanes::Float32>(table, at(DataType::kFloat32));
  FillReduceRow<typename Lanes::Float64>(table, at(DataType::kFloat64));
  table.divide[at(DataType::kInt8)] = &DivideInt8;
  table.divide[at(DataType::kUint8)] = &DivideUint8;
  table.divide[at(DataType::kInt32)] = divide_int32;
  table.divide[at(DataType::kUint32)] = divide_uint32;
  table.divide[at(DataType::kInt64)] = &DivideInt64;
  table.divide[at(DataType::kUint64)] = &DivideUint64;
  table.divide[at(DataType::kFloat16)] = &DivideFloat<typename Lanes::Half>;
  table.divide[at(DataType::kBFloat16)] = &DivideFloat<typename Lanes::BFloat16>;
  table.divide[at(DataType::kFloat32)] = &DivideFloat<typename Lanes::Float32>;
  table.divide[at(DataType::kFloat64)] = &DivideFloat<typename Lanes::Float64>;
  table.half_to_float = &ConvertLoop<typename Lanes::Half, typename Lanes::Float32>;
  table.float_to_half = &ConvertLoop<typename Lanes::Float32, typename Lanes::Half>;
  table.bfloat16_to_float = &ConvertLoop<typename Lanes::BFloat16, typename Lanes::Float32>;
  table.float_to_bfloat16 = &ConvertLoop<typename Lanes::Float32, typename Lanes::BFloat16>;
  return table;
}

}  // namespace weft::kernels_internal::simd
