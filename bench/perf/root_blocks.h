// Gather and scatter as point-to-point groups. Weft has neither call, so the tools build them as
// nccl-tests does from ncclSend/ncclRecv: inside one group the root exchanges one block with every
// other rank and copies its own block, which in place already sits where it belongs.
#pragma once

#include <cstddef>

#include "weft/comm/communicator.h"
#include "weft/comm/work.h"
#include "weft/kernels/dtype.h"

namespace weft::perf {

enum class BlockFlow {
  kToRoot,    // gather: block r of the root's receive buffer comes from rank r's send buffer
  kFromRoot,  // scatter: block r of the root's send buffer goes to rank r's receive buffer
};

// Issues the group; `count` elements per block. A count of 0 issues an empty group.
Work ExchangeRootBlocks(Communicator& comm, BlockFlow flow, const void* send, void* recv,
                        size_t count, DataType type, int root);

}  // namespace weft::perf
