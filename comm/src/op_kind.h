// The kinds of operation a communicator runs; they travel in envelopes (append only).
#pragma once

#include <cstdint>

namespace weft {

enum class OpKind : uint16_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kBarrier = 7,
  kSend = 8,  // point-to-point; the receiver expects kSend too
  kSplit = 9,
};

// "all_reduce", "reduce_scatter", ... ("send" for point-to-point messages).
const char* Name(OpKind kind);

}  // namespace weft
