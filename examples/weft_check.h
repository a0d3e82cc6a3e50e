/* The examples' NCCL-style error check: on failure, prints the call, the code and the full
 * message (rank, operation, peer), and exits. */
#ifndef WEFT_EXAMPLES_WEFT_CHECK_H_
#define WEFT_EXAMPLES_WEFT_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <weft/comm/weft.h>

#define WEFTCHECK(call)                                                        \
  do {                                                                         \
    weftResult_t r_ = (call);                                                  \
    if (r_ != weftSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
              weftGetErrorString(r_), weftGetLastError(NULL));                 \
      exit(EXIT_FAILURE);                                                      \
    }                                                                          \
  } while (0)

#endif /* WEFT_EXAMPLES_WEFT_CHECK_H_ */
