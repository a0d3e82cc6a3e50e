/* Failures the caller did not make: a peer that dies, and abort. */
#define _POSIX_C_SOURCE 200809L /* pthreads */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "capi_worker.h"

/* Rank 1 leaves (exit status 0, so weftrun lets the others go on); the others' all-reduce fails
 * and weftCommGetAsyncError reports it without anyone waiting. */
void SuitePeerDies(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));
  EXPECT_OK(weftBarrier(*world, NULL));
  if (rank == 1) {
    printf("rank 1: leaving\n");
    fflush(stdout);
    _exit(0);
  }
  static float data[1 << 16];
  weftRequest_t req = NULL;
  EXPECT_OK(weftAllReduce(data, data, 1 << 16, weftFloat, weftSum, *world, &req));
  weftResult_t async = weftSuccess;
  for (int waited = 0; waited < 60000 && async == weftSuccess; waited += 5) {
    EXPECT_OK(weftCommGetAsyncError(*world, &async));
    if (async == weftSuccess) SleepMs(5);
  }
  CHECK(async == weftRemoteError);
  char text[64];
  snprintf(text, sizeof text, "rank %d: all_reduce #1 (", rank); /* the barrier was #0 */
  EXPECT_MESSAGE(text);
  EXPECT_MESSAGE("rank 1");
  printf("rank %d: async error: %s\n", rank, weftGetLastError(NULL));
  EXPECT_RESULT(weftRequestWait(req), weftRemoteError);
  EXPECT_MESSAGE(text);
  EXPECT_OK(weftRequestFree(req));
  /* Later operations fail at once, with the first failure's code. */
  EXPECT_RESULT(weftBarrier(*world, NULL), weftRemoteError);
  EXPECT_MESSAGE("an earlier operation failed");
  EXPECT_OK(weftCommGetAsyncError(*world, &async));
  CHECK(async == weftRemoteError);
}

struct Blocked {
  weftComm_t comm;
  int from;
  weftResult_t result;
};

static void* BlockingRecv(void* data) {
  struct Blocked* b = data;
  int32_t value;
  b->result = weftRecv(&value, 1, weftInt32, b->from, b->comm, NULL);
  return NULL;
}

struct Seen {
  int calls;
  weftResult_t result;
  int message_ok;
};

static void Record(weftRequest_t request, weftResult_t result, void* data) {
  struct Seen* seen = data;
  (void)request;
  seen->calls++;
  seen->result = result;
  seen->message_ok = strstr(weftGetLastError(NULL), "aborted") != NULL;
}

/* Rank 0 aborts two communicators with operations blocked on rank 1, which never sends: a
 * blocking call on another thread and a request return weftAborted, its callback fires once. */
void SuiteAbort(weftComm_t* world) {
  int rank;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  weftComm_t first = Dup(*world), second = Dup(*world);
  if (rank == 0) {
    struct Blocked blocked = {first, 1, weftSuccess};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, BlockingRecv, &blocked) == 0);
    int32_t value;
    weftRequest_t req = NULL;
    struct Seen seen = {0, weftSuccess, 0};
    EXPECT_OK(weftRecv(&value, 1, weftInt32, 1, second, &req));
    EXPECT_OK(weftRequestSetCallback(req, Record, &seen));
    SleepMs(200);
    EXPECT_RESULT(weftRequestTest(req), weftInProgress);
    EXPECT_OK(weftCommAbort(first));
    pthread_join(thread, NULL);
    CHECK(blocked.result == weftAborted);
    EXPECT_OK(weftCommAbort(second)); /* returns once its callbacks have run */
    CHECK(seen.calls == 1 && seen.result == weftAborted && seen.message_ok);
    EXPECT_RESULT(weftRequestWait(req), weftAborted); /* a request outlives its communicator */
    EXPECT_MESSAGE("aborted");
    EXPECT_OK(weftRequestFree(req));
  }
  EXPECT_OK(weftBarrier(*world, NULL)); /* rank 0 is done with them */
  if (rank != 0) {
    EXPECT_OK(weftCommDestroy(second));
    EXPECT_OK(weftCommDestroy(first));
  }
}
