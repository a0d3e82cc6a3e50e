/* Errors the caller makes: codes, messages, and a communicator that stays usable. */
#include <stdint.h>
#include <stdio.h>

#include "capi_worker.h"

void SuiteArgumentErrors(weftComm_t* world) {
  weftComm_t comm = *world;
  int rank, n;
  EXPECT_OK(weftCommUserRank(comm, &rank));
  EXPECT_OK(weftCommCount(comm, &n));
  char text[64];
  float x[4] = {1, 2, 3, 4};
  weftRequest_t req = (weftRequest_t)x; /* a failed call sets it to NULL */

  EXPECT_RESULT(weftAllReduce(x, x, 4, weftFloat, weftSum, NULL, &req), weftInvalidArgument);
  EXPECT_MESSAGE("weftAllReduce: comm is NULL");
  CHECK(req == NULL);
  EXPECT_RESULT(weftAllReduce(x, NULL, 4, weftFloat, weftSum, comm, &req), weftInvalidArgument);
  snprintf(text, sizeof text, "rank %d: all_reduce: recv buffer is null (count 4)", rank);
  EXPECT_MESSAGE(text);
  CHECK(req == NULL);
  EXPECT_RESULT(weftAllReduce(x, x, 4, weftNumTypes, weftSum, comm, NULL), weftInvalidArgument);
  EXPECT_MESSAGE("weftAllReduce: invalid data type 10");
  EXPECT_RESULT(weftReduce(x, x, 4, weftFloat, weftNumOps, 0, comm, NULL), weftInvalidArgument);
  EXPECT_MESSAGE("weftReduce: invalid reduction operator 5");
  EXPECT_RESULT(weftBroadcast(x, x, 4, weftFloat, n, comm, NULL), weftInvalidArgument);
  snprintf(text, sizeof text, "root %d is not a rank of this communicator (size %d)", n, n);
  EXPECT_MESSAGE(text);
  EXPECT_RESULT(weftSend(x, 4, weftFloat, -1, comm, NULL), weftInvalidArgument);
  EXPECT_MESSAGE("peer -1 is not a rank");
  EXPECT_RESULT(weftRecv(x, 4, weftFloat, rank, comm, NULL), weftInvalidArgument);
  EXPECT_MESSAGE("peer is this rank itself");
  EXPECT_RESULT(weftReduceScatter(NULL, x, 1, weftFloat, weftSum, comm, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftAllGather(x, NULL, 1, weftFloat, comm, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftAllToAll(NULL, x, 1, weftFloat, comm, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftBarrier(NULL, NULL), weftInvalidArgument);

  /* Calls out of order. */
  EXPECT_RESULT(weftGroupEnd(), weftInvalidUsage);
  EXPECT_MESSAGE("weftGroupEnd: no group was started");
  weftComm_t child = NULL;
  EXPECT_OK(weftGroupStart());
  EXPECT_RESULT(weftCommSplit(comm, 0, 0, &child, NULL), weftInvalidUsage);
  EXPECT_OK(weftGroupEnd());
  EXPECT_RESULT(weftCommSplit(comm, 0, 0, NULL, NULL), weftInvalidArgument);

  /* The variable-count collectives check their arrays. */
  size_t counts[64] = {0}, displs[64] = {0};
  EXPECT_RESULT(weftAllGatherV(x, 0, x, NULL, displs, weftFloat, comm, &req), weftInvalidArgument);
  snprintf(text, sizeof text, "rank %d: weftAllGatherV: recvcounts is NULL", rank);
  EXPECT_MESSAGE(text);
  CHECK(req == NULL);
  EXPECT_RESULT(weftReduceScatterV(x, x, counts, weftNumTypes, weftSum, comm, NULL),
                weftInvalidArgument);
  EXPECT_MESSAGE("weftReduceScatterV: invalid data type 10");
  EXPECT_RESULT(weftAllToAllV(x, counts, NULL, x, counts, displs, weftFloat, comm, NULL),
                weftInvalidArgument);
  EXPECT_MESSAGE("senddispls is NULL");
  counts[rank] = 1; /* recvcounts[rank] must be this rank's sendcount */
  EXPECT_RESULT(weftAllGatherV(x, 2, x + 2, counts, displs, weftFloat, comm, NULL),
                weftInvalidArgument);
  EXPECT_MESSAGE("all_gather_v");

  /* The library, the codes, the small queries. */
  int version = 0, count = 0;
  EXPECT_OK(weftGetVersion(&version));
  CHECK(version == WEFT_VERSION_CODE && version == 100);
  EXPECT_RESULT(weftGetVersion(NULL), weftInvalidArgument);
  for (int r = 0; r <= weftNumResults; ++r) {
    const char* s = weftGetErrorString((weftResult_t)r);
    CHECK(s != NULL && s[0] != '\0');
  }
  CHECK(strcmp(weftGetErrorString(weftNumResults), "unknown result code") == 0);
  CHECK(strcmp(weftGetErrorString(weftRemoteError), weftGetErrorString(weftTimeout)) != 0);
  EXPECT_RESULT(weftCommCount(NULL, &count), weftInvalidArgument);
  EXPECT_RESULT(weftCommUserRank(comm, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftCommDestroy(NULL), weftInvalidArgument);
  EXPECT_RESULT(weftCommAbort(NULL), weftInvalidArgument);
  weftResult_t async = weftInternalError;
  EXPECT_RESULT(weftCommGetAsyncError(comm, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftCommGetAsyncError(NULL, &async), weftInvalidArgument);

  /* None of this harmed the communicator. */
  EXPECT_OK(weftCommGetAsyncError(comm, &async));
  CHECK(async == weftSuccess);
  EXPECT_OK(weftAllReduce(x, x, 4, weftFloat, weftSum, comm, NULL));
  CHECK(x[3] == 4.0f * (float)n);
}

/* A framework store that fails: set refuses, get times out at once. */
static weftResult_t RefuseSet(void* ctx, const char* key, const void* value, size_t len) {
  (void)ctx, (void)key, (void)value, (void)len;
  return weftSystemError;
}
static weftResult_t NeverThere(void* ctx, const char* key, void* buf, size_t cap, size_t* len,
                               int64_t timeout_ms) {
  (void)ctx, (void)key, (void)buf, (void)cap, (void)len, (void)timeout_ms;
  return weftTimeout;
}

void SuiteCreationErrors(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));
  weftComm_t comm = (weftComm_t)world; /* a failed creation sets it to NULL */
  weftUniqueId id;
  memset(&id, 0, sizeof id);
  strcpy(id.internal, "nonsense");
  EXPECT_RESULT(weftCommInitRank(&comm, 2, id, 2), weftInvalidArgument);
  EXPECT_MESSAGE("weftCommInitRank: Communicator::Create: rank 2 is not in [0, 2)");
  CHECK(comm == NULL);
  EXPECT_RESULT(weftCommInitRank(&comm, 2, id, 0), weftInvalidArgument);
  EXPECT_MESSAGE("weftCommInitRank: ");
  memset(id.internal, 'x', sizeof id.internal);
  EXPECT_RESULT(weftCommInitRank(&comm, 2, id, 0), weftInvalidArgument);
  EXPECT_MESSAGE("not NUL-terminated");
  EXPECT_RESULT(weftCommInitRank(NULL, 2, id, 0), weftInvalidArgument);
  EXPECT_RESULT(weftGetUniqueId(NULL), weftInvalidArgument);

  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.magic = 0;
  EXPECT_RESULT(weftCommInitFromEnv(&comm, &config), weftInvalidArgument);
  EXPECT_MESSAGE("WEFT_CONFIG_INITIALIZER");
  weftConfig_t negative = WEFT_CONFIG_INITIALIZER;
  negative.timeout_ms = -1;
  EXPECT_RESULT(weftCommSplit(*world, 0, 0, &comm, &negative), weftInvalidArgument);
  EXPECT_MESSAGE("timeout_ms -1 < 0");
  weftConfig_t bad_algo = WEFT_CONFIG_INITIALIZER;
  bad_algo.algorithm = "no-such-algorithm";
  EXPECT_RESULT(weftCommInitFromEnv(&comm, &bad_algo), weftInvalidArgument);
  EXPECT_MESSAGE("no-such-algorithm");
  EXPECT_RESULT(weftCommInitFromEnv(NULL, NULL), weftInvalidArgument);

  /* The framework's store: rank 0 cannot set the id, the others never see it; the callbacks'
   * codes come back, and each creation uses the next key. */
  weftStore_t store = {&store, RefuseSet, NeverThere};
  for (int round = 0; round < 2; ++round) {
    char key[64];
    snprintf(key, sizeof key, "key 'weft/unique_id/%d'", round);
    EXPECT_RESULT(weftCommInitWithStore(&comm, &store, rank, n),
                  rank == 0 ? weftSystemError : weftTimeout);
    EXPECT_MESSAGE(key);
    EXPECT_MESSAGE(rank == 0 ? "setting the unique id" : "getting rank 0's unique id");
    CHECK(comm == NULL);
  }
  weftStore_t no_get = {NULL, RefuseSet, NULL};
  EXPECT_RESULT(weftCommInitWithStoreConfig(&comm, &no_get, rank, n, NULL), weftInvalidArgument);
  EXPECT_RESULT(weftCommInitWithStore(&comm, &store, n, n), weftInvalidArgument);
  EXPECT_MESSAGE("rank");
}
