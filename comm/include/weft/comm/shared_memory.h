// Shared buffers: host memory that the other ranks on this host can map, so that collectives
// whose buffers lie in it move data with plain loads and stores instead of copies through the
// kernel (the CPU counterpart of ncclMemAlloc + buffer registration).
//
//   absl::StatusOr<void*> grads = weft::AllocShared(bytes);
//   comm->AllReduce(*grads, *grads, n, weft::DataType::kFloat32, weft::ReduceOp::kSum);
//   ...
//   weft::FreeShared(*grads);
//
// Any buffer works with any collective; a shared one only makes large single-host collectives
// faster. Nothing needs registering: a communicator recognises these buffers (also at an offset
// inside them) and its peers map them on first use, through the owner's process (pidfd_getfd),
// which the same permission as process_vm_readv allows. A buffer must not be freed while an
// operation that uses it is pending, on this rank or any peer.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// Page-aligned, zero-filled, transparent huge pages where the kernel offers them.
absl::StatusOr<void*> AllocShared(size_t bytes);
// Fails (and frees nothing) on a pointer that AllocShared did not return.
absl::Status FreeShared(void* pointer);

}  // namespace weft
