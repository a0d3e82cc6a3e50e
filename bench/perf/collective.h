// What one *_perf tool measures: the "collective spec" the shared harness runs.
//
// Each tool is the harness plus one Collective (all_reduce.cc, scatter.cc, ...). A spec says what
// nccl-tests' per-test files say: how a size becomes buffer lengths and the count passed to the
// call (Layout), where in-place buffers sit, the bus-bandwidth factor, which values a rank sends
// and which it must receive, and how to issue one operation.
#pragma once

#include <cstddef>
#include <vector>

#include "weft/comm/communicator.h"
#include "weft/comm/work.h"
#include "weft/kernels/dtype.h"

namespace weft::perf {

// Buffer lengths for one size, in elements (nccl-tests' getCollByteCount).
struct Layout {
  size_t send_count = 0;   // elements the send buffer holds
  size_t recv_count = 0;   // elements the receive buffer holds
  size_t param_count = 0;  // the count passed to the call (the table's "count" column)
  // In place, send = recv_buffer + send_in_place_offset * rank and
  // recv = recv_buffer + recv_in_place_offset * rank.
  size_t send_in_place_offset = 0;
  size_t recv_in_place_offset = 0;
};

// A run of received elements and where they come from: `count` elements at `recv_offset` of the
// receive buffer must equal elements [source_index, source_index + count) of rank
// `source_rank`'s input, or, for a reduction, the reduction over all ranks at those indices.
struct Block {
  static constexpr int kReduced = -1;
  size_t recv_offset = 0;
  size_t count = 0;
  int source_rank = kReduced;
  size_t source_index = 0;
};

// What the table's redop column shows, and whether -o loops over operators.
enum class OpColumn {
  kOperator,  // the operator's name; -o all runs each
  kNone,      // "none"; the operator is irrelevant and runs once
};

class Collective {
 public:
  virtual ~Collective() = default;

  // The tool's name without "_perf", e.g. "all_reduce".
  virtual const char* name() const = 0;
  virtual OpColumn op_column() const = 0;
  // Inputs are reduction inputs (order-independent exact sums, products, ...) rather than
  // distinct values that show where each element went.
  virtual bool reduces() const = 0;
  // Rooted tools print and loop over roots (-r, -r -1); the others print root -1.
  virtual bool rooted() const = 0;
  // Whether the in-place result is defined and checked (sendrecv's is not: N/A).
  virtual bool checks_in_place() const { return true; }
  // Point-to-point tools aggregate -m operations inside one group, as nccl-tests does.
  virtual bool grouped() const { return false; }
  // The communicator's name for the collective (Communicator::AlgorithmFor, PredictedSeconds),
  // or nullptr for tools built from point-to-point groups, which no tuner chooses for.
  virtual const char* tuned_name() const { return nullptr; }

  // `count` = size / element size.
  virtual Layout GetLayout(size_t count, size_t element_size, int ranks) const = 0;
  // busbw = algbw x factor.
  virtual double BusFactor(int ranks) const = 0;

  // How many leading elements of the send region hold this rank's input (0 when the rank sends
  // nothing, e.g. a non-root of broadcast).
  virtual size_t InputCount(const Layout& layout, int rank, int root) const = 0;
  // What this rank's receive region must hold afterwards (nothing where it receives nothing).
  virtual std::vector<Block> Expected(const Layout& layout, int rank, int ranks,
                                      int root) const = 0;

  // Issues one operation. `op` and `root` are passed whether or not the collective uses them.
  virtual Work Run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op, int root) const = 0;
};

// The collective this binary measures; each tool's spec file defines it.
const Collective& PerfCollective();

// Rounds count / ranks down to a multiple of 16 bytes, as nccl-tests does for the collectives
// whose size is the total over ranks (reduce_scatter, all_gather, alltoall, scatter, gather).
inline size_t PerRankCount(size_t count, size_t element_size, int ranks) {
  const size_t per_rank = count / static_cast<size_t>(ranks);
  const size_t granule = 16 / element_size;
  return per_rank - per_rank % granule;
}

// all_gather and gather: the size is the whole receive buffer of one block per rank; in place,
// each rank sends its own block of it.
inline Layout GatheredLayout(size_t count, size_t element_size, int ranks) {
  const size_t block = PerRankCount(count, element_size, ranks);
  return {.send_count = block,
          .recv_count = block * static_cast<size_t>(ranks),
          .param_count = block,
          .send_in_place_offset = block};
}

// reduce_scatter and scatter: the size is the whole send buffer of one block per rank; in place,
// each rank's result is its own block of it.
inline Layout ScatteredLayout(size_t count, size_t element_size, int ranks) {
  const size_t block = PerRankCount(count, element_size, ranks);
  return {.send_count = block * static_cast<size_t>(ranks),
          .recv_count = block,
          .param_count = block,
          .recv_in_place_offset = block};
}

// Block r of the receive buffer holds rank r's first `block` input elements (all_gather, gather).
inline std::vector<Block> BlocksInRankOrder(size_t block, int ranks) {
  std::vector<Block> blocks;
  for (int r = 0; r < ranks; ++r) {
    blocks.push_back(
        {.recv_offset = static_cast<size_t>(r) * block, .count = block, .source_rank = r});
  }
  return blocks;
}

// (n-1)/n: every rank's link carries all blocks but its own, once.
inline double OnePassBusFactor(int ranks) { return static_cast<double>(ranks - 1) / ranks; }

}  // namespace weft::perf
