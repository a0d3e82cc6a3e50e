/* Point-to-point, groups (per thread, across communicators), split and unique ids. */
#include <stdint.h>

#include "capi_worker.h"

static void Ring(weftComm_t comm, int async) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(comm, &rank));
  EXPECT_OK(weftCommCount(comm, &n));
  if (n < 2) return;
  int64_t mine[3] = {rank, rank * 2, rank * 3}, left[3] = {-1, -1, -1};
  weftRequest_t send = NULL, recv = NULL;
  EXPECT_OK(weftGroupStart());
  EXPECT_OK(weftSend(mine, 3, weftInt64, (rank + 1) % n, comm, async ? &send : NULL));
  EXPECT_OK(weftRecv(left, 3, weftInt64, (rank + n - 1) % n, comm, async ? &recv : NULL));
  if (async) EXPECT_RESULT(weftRequestWait(recv), weftInvalidUsage); /* group still open */
  EXPECT_OK(weftGroupEnd());
  Complete(send);
  Complete(recv);
  const int from = (rank + n - 1) % n;
  CHECK(left[0] == from && left[1] == 2 * from && left[2] == 3 * from);
}

void SuiteP2pAndGroups(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));
  Ring(*world, 0);
  Ring(*world, 1);

  /* Blocking, outside any group: rank 0 to rank 1. */
  float message[2] = {0, 0};
  if (rank == 0) {
    message[0] = 1.25f;
    message[1] = -2.5f;
    EXPECT_OK(weftSend(message, 2, weftFloat, 1, *world, NULL));
  } else if (rank == 1) {
    EXPECT_OK(weftRecv(message, 2, weftFloat, 0, *world, NULL));
    CHECK(message[0] == 1.25f && message[1] == -2.5f);
  }

  /* One group over two communicators, nested: a request on one, a blocking call on the other,
   * which weftGroupEnd waits for. */
  weftComm_t dup = Dup(*world);
  int32_t a = rank, b = 10 * rank;
  weftRequest_t req = NULL;
  EXPECT_OK(weftGroupStart());
  EXPECT_OK(weftAllReduce(&a, &a, 1, weftInt32, weftSum, *world, &req));
  EXPECT_OK(weftGroupStart());
  EXPECT_OK(weftAllReduce(&b, &b, 1, weftInt32, weftSum, dup, NULL));
  EXPECT_OK(weftGroupEnd()); /* inner: issues nothing */
  EXPECT_RESULT(weftRequestTest(req), weftInProgress);
  EXPECT_OK(weftGroupEnd());
  CHECK(b == 10 * n * (n - 1) / 2); /* done: it was issued without a request */
  Complete(req);
  CHECK(a == n * (n - 1) / 2);
  EXPECT_OK(weftCommDestroy(dup));
}

void SuiteSplitAndIds(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));

  /* All but the last rank, in reverse order (key); the last gets no communicator. */
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeout_ms = 60000;
  weftComm_t child = (weftComm_t)&config; /* overwritten either way */
  EXPECT_OK(weftCommSplit(*world, rank == n - 1 ? WEFT_SPLIT_NOCOLOR : 5, -rank, &child, &config));
  if (rank == n - 1) {
    CHECK(child == NULL);
  } else {
    int crank = -1, csize = -1;
    EXPECT_OK(weftCommUserRank(child, &crank));
    EXPECT_OK(weftCommCount(child, &csize));
    CHECK(csize == n - 1 && crank == n - 2 - rank);
    int32_t x = rank;
    EXPECT_OK(weftAllReduce(&x, &x, 1, weftInt32, weftMax, child, NULL));
    CHECK(x == n - 2);
    EXPECT_OK(weftCommDestroy(child));
  }

  /* NCCL's bootstrap: rank 0 makes the id, the world broadcasts it, all create. */
  weftUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) EXPECT_OK(weftGetUniqueId(&id));
  EXPECT_OK(weftBroadcast(&id, &id, sizeof id, weftUint8, 0, *world, NULL));
  CHECK(strncmp(id.internal, "weft1:", 6) == 0);
  weftComm_t fresh = NULL, configured = NULL;
  EXPECT_OK(weftCommInitRank(&fresh, n, id, rank));
  weftUniqueId id2;
  memset(&id2, 0, sizeof id2);
  if (rank == 0) EXPECT_OK(weftGetUniqueId(&id2));
  EXPECT_OK(weftBroadcast(&id2, &id2, sizeof id2, weftUint8, 0, *world, NULL));
  /* Reversed ranks: the new communicator's numbering is the caller's choice. */
  EXPECT_OK(weftCommInitRankConfig(&configured, n, id2, n - 1 - rank, &config));
  if (fresh != NULL && configured != NULL) {
    int32_t x = rank, y = rank;
    EXPECT_OK(weftAllReduce(&x, &x, 1, weftInt32, weftSum, fresh, NULL));
    EXPECT_OK(weftBroadcast(&y, &y, 1, weftInt32, 0, configured, NULL)); /* from world rank n-1 */
    CHECK(x == n * (n - 1) / 2 && y == n - 1);
    EXPECT_OK(weftCommDestroy(configured));
    EXPECT_OK(weftCommDestroy(fresh));
  }
}
