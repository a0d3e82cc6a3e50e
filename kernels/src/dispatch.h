// Chooses the kernel table of the SIMD level in use (see reduce.h for how the level is picked).
#pragma once

#include "kernel_table.h"
#include "weft/kernels/reduce.h"

namespace weft::kernels_internal {

// The table of the active level. Cheap enough to call once per kernel invocation.
const KernelTable& ActiveKernels();

}  // namespace weft::kernels_internal
