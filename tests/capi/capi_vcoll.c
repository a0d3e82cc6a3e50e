/* The variable-count collectives: uneven counts (zeros among them), out-of-order blocks with
 * gaps, in place, blocking and with requests. */
#include <stdint.h>
#include <stdlib.h>

#include "capi_worker.h"

enum { kMaxRanks = 16 };

/* Block r has r % 3 * 5 elements (0 for ranks 0 and 3); blocks lie in reverse rank order, a
 * gap of 2 elements before each. Returns the buffer length. */
static size_t Layout(int n, size_t* counts, size_t* displs) {
  size_t at = 0;
  for (int r = n - 1; r >= 0; --r) {
    counts[r] = (size_t)(r % 3) * 5;
    displs[r] = at + 2;
    at += 2 + counts[r];
  }
  return at;
}

static void Once(weftComm_t comm, int async) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(comm, &rank));
  EXPECT_OK(weftCommCount(comm, &n));
  if (n > kMaxRanks) return;
  size_t counts[kMaxRanks], displs[kMaxRanks], ones[kMaxRanks], at[kMaxRanks];
  const size_t len = Layout(n, counts, displs);
  weftRequest_t req[3] = {NULL, NULL, NULL};

  /* all-gather-v, in place: this rank's block is already where it belongs. */
  int32_t* gathered = calloc(len, sizeof(int32_t));
  for (size_t i = 0; i < counts[rank]; ++i) gathered[displs[rank] + i] = rank * 100 + (int)i;
  EXPECT_OK(weftAllGatherV(gathered + displs[rank], counts[rank], gathered, counts, displs,
                           weftInt32, comm, async ? &req[0] : NULL));

  /* reduce-scatter-v: block r of every rank's send, summed, lands on rank r. */
  size_t total = 0;
  for (int r = 0; r < n; ++r) total += counts[r];
  double* send = malloc(sizeof(double) * (total + 1));
  for (size_t i = 0; i < total; ++i) send[i] = rank + (double)i;
  double reduced[16];
  EXPECT_OK(
      weftReduceScatterV(send, reduced, counts, weftDouble, weftSum, comm, async ? &req[1] : NULL));

  /* all-to-all-v: one element to every rank, at reversed send displacements. */
  int64_t out[kMaxRanks], in[kMaxRanks];
  for (int j = 0; j < n; ++j) {
    ones[j] = 1;
    at[j] = (size_t)(n - 1 - j);
    out[n - 1 - j] = rank * 1000 + j;
  }
  EXPECT_OK(weftAllToAllV(out, ones, at, in, ones, at, weftInt64, comm, async ? &req[2] : NULL));
  for (int i = 0; i < 3; ++i) Complete(req[i]);

  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < counts[r]; ++i) CHECK(gathered[displs[r] + i] == r * 100 + (int)i);
    CHECK(in[n - 1 - r] == r * 1000 + rank);
  }
  size_t first = 0;
  for (int r = 0; r < rank; ++r) first += counts[r];
  for (size_t i = 0; i < counts[rank]; ++i) {
    CHECK(reduced[i] == n * (double)(first + i) + n * (n - 1) / 2.0);
  }
  free(gathered);
  free(send);
}

void SuiteVariableCounts(weftComm_t* world) {
  Once(*world, 0);
  Once(*world, 1);
}
