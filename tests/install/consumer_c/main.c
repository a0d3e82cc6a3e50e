/* Through the installed weft.h and libweft.so: a communicator from the launcher, a blocking and
 * an asynchronous all-reduce. */
#include <stdio.h>
#include <weft/comm/weft.h>

int main(void) {
  weftComm_t comm;
  int rank = -1, n = 0, version = 0;
  weftResult_t r = weftCommInitFromEnv(&comm, NULL);
  if (r != weftSuccess) {
    fprintf(stderr, "%s: %s\n", weftGetErrorString(r), weftGetLastError(NULL));
    return 1;
  }
  weftGetVersion(&version);
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  double x[3] = {1, 2, 3};
  weftRequest_t req;
  r = weftAllReduce(x, x, 3, weftDouble, weftSum, comm, NULL);
  if (r == weftSuccess) r = weftAllReduce(x, x, 3, weftDouble, weftMax, comm, &req);
  if (r == weftSuccess) r = weftRequestWait(req);
  if (r == weftSuccess) weftRequestFree(req);
  printf("c consumer rank %d of %d (weft %d): %s %g\n", rank, n, version,
         r == weftSuccess ? "ok" : weftGetLastError(NULL), x[2]);
  weftCommDestroy(comm);
  return r == weftSuccess && x[2] == 3.0 * n ? 0 : 1;
}
