// WEFT_VECTOR_CLONES: compiles a hot loop for AVX-512, AVX2 and baseline x86-64 and lets the
// dynamic loader pick one per CPU (GCC's target_clones, an ifunc). Every variant evaluates the
// same IEEE operations per element (the trainer compiles with -ffp-contract=off: no fused
// multiply-adds), so results do not depend on the CPU.
//
// ThreadSanitizer instruments the ifunc resolver that target_clones generates, and the loader can
// run that resolver while relocating the program, before the TSan runtime exists: the binary
// dies at load. TSan builds therefore compile the baseline variant alone; the loops' memory
// accesses are the same in every variant, so TSan loses nothing it could check.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define WEFT_VECTOR_CLONES
#else
#define WEFT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
