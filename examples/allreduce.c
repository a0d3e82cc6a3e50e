/* All-reduce through Weft's C API, with NCCL-style error checking.
 *
 *   weftrun -n 4 build/examples/example_allreduce
 *
 * Every rank contributes rank + 1 to each element of a buffer; the sum is checked on every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <weft/comm/weft.h>

#include "weft_check.h"

int main(void) {
  weftComm_t comm;
  int rank, nranks, version;
  WEFTCHECK(weftGetVersion(&version));
  WEFTCHECK(weftCommInitFromEnv(&comm, NULL));
  WEFTCHECK(weftCommUserRank(comm, &rank));
  WEFTCHECK(weftCommCount(comm, &nranks));

  enum { kCount = 1 << 16 };
  float* data = malloc(kCount * sizeof(float));
  if (data == NULL) return EXIT_FAILURE;
  for (size_t i = 0; i < kCount; ++i) data[i] = (float)(rank + 1);

  /* In place, blocking (request NULL): returns once the sum is in `data`. */
  WEFTCHECK(weftAllReduce(data, data, kCount, weftFloat, weftSum, comm, NULL));

  const float expected = (float)nranks * (float)(nranks + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) wrong += data[i] != expected;
  printf("rank %d of %d: all-reduce of %d floats: %s (sum %g, weft %d)\n", rank, nranks, kCount,
         wrong == 0 ? "ok" : "WRONG", data[0], version);

  /* A mistake is an error value, not a crash: the message names the rank and the call. */
  weftResult_t r = weftAllReduce(data, NULL, kCount, weftFloat, weftSum, comm, NULL);
  printf("rank %d: a null receive buffer gives %s: %s\n", rank, weftGetErrorString(r),
         weftGetLastError(comm));

  free(data);
  WEFTCHECK(weftCommDestroy(comm));
  return wrong == 0 && r == weftInvalidArgument ? EXIT_SUCCESS : EXIT_FAILURE;
}
