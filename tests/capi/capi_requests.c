/* Requests: test and wait, and completion callbacks (once each, in order, on the communicator's
 * callback thread, also for requests already finished or already freed). */
#define _POSIX_C_SOURCE 200809L /* pthreads */

#include <pthread.h>
#include <stdint.h>

#include "capi_worker.h"

void SuiteRequests(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));
  weftComm_t side = Dup(*world); /* coordination that must not queue behind the receive */

  /* Rank 0's receive cannot finish before rank 1 sends, which it does after the barrier. */
  int32_t value = -1;
  weftRequest_t recv = NULL, send = NULL;
  if (rank == 0) {
    EXPECT_OK(weftRecv(&value, 1, weftInt32, 1, *world, &recv));
    EXPECT_RESULT(weftRequestTest(recv), weftInProgress);
  }
  EXPECT_OK(weftBarrier(side, NULL));
  if (rank == 1) {
    value = 42;
    EXPECT_OK(weftSend(&value, 1, weftInt32, 0, *world, &send));
    EXPECT_OK(weftRequestWait(send));
    EXPECT_OK(weftRequestFree(send));
  }
  if (rank == 0) {
    EXPECT_OK(weftRequestWait(recv));
    EXPECT_OK(weftRequestWait(recv)); /* again: the same result */
    EXPECT_OK(weftRequestTest(recv));
    CHECK(value == 42);
    EXPECT_OK(weftRequestFree(recv));
  }

  /* A zero-count call finishes at once and still hands out a request. */
  weftRequest_t empty = NULL;
  EXPECT_OK(weftAllReduce(NULL, NULL, 0, weftFloat, weftSum, *world, &empty));
  CHECK(empty != NULL);
  EXPECT_OK(weftRequestTest(empty));
  EXPECT_OK(weftRequestFree(empty));
  EXPECT_OK(weftRequestFree(NULL));
  EXPECT_RESULT(weftRequestTest(NULL), weftInvalidArgument);
  EXPECT_RESULT(weftRequestWait(NULL), weftInvalidArgument);
  EXPECT_OK(weftCommDestroy(side));
}

enum { kOps = 12 };

struct Log {
  pthread_mutex_t mu;
  pthread_cond_t changed;
  int calls[kOps + 2];
  int order[kOps + 2];
  int done;
  int not_success;
  int on_main;
  int threads_differ;
  int have_thread;
  pthread_t main_thread, callback_thread;
  weftComm_t comm;
  weftResult_t destroy_result;
};

struct Call {
  struct Log* log;
  int index;
  int free_here; /* the callback frees its request (the test never did) */
};

static void OnDone(weftRequest_t request, weftResult_t result, void* data) {
  struct Call* call = data;
  struct Log* log = call->log;
  /* Destroying its own communicator from a callback is refused (once is enough). */
  if (call->index == 0) log->destroy_result = weftCommDestroy(log->comm);
  pthread_mutex_lock(&log->mu);
  log->calls[call->index]++;
  log->order[log->done++] = call->index;
  if (result != weftSuccess) log->not_success++;
  if (pthread_equal(pthread_self(), log->main_thread)) log->on_main++;
  if (!log->have_thread) {
    log->callback_thread = pthread_self();
    log->have_thread = 1;
  } else if (!pthread_equal(pthread_self(), log->callback_thread)) {
    log->threads_differ++;
  }
  pthread_cond_broadcast(&log->changed);
  pthread_mutex_unlock(&log->mu);
  if (call->free_here) weftRequestFree(request);
}

static void WaitForCallbacks(struct Log* log, int count) {
  pthread_mutex_lock(&log->mu);
  while (log->done < count) pthread_cond_wait(&log->changed, &log->mu);
  pthread_mutex_unlock(&log->mu);
}

/* Aborts the communicator that `data` points to, from a callback. */
static void AbortIt(weftRequest_t request, weftResult_t result, void* data) {
  weftComm_t* comm = data;
  (void)result;
  weftRequestFree(request);
  weftCommAbort(*comm);
  __atomic_store_n(comm, NULL, __ATOMIC_RELEASE);
}

void SuiteCallbacks(weftComm_t* world) {
  int rank, n;
  EXPECT_OK(weftCommUserRank(*world, &rank));
  EXPECT_OK(weftCommCount(*world, &n));
  struct Log log = {PTHREAD_MUTEX_INITIALIZER,
                    PTHREAD_COND_INITIALIZER,
                    {0},
                    {0},
                    0,
                    0,
                    0,
                    0,
                    0,
                    pthread_self(),
                    pthread_self(),
                    *world,
                    weftSuccess};
  struct Call calls[kOps + 2];
  float data[kOps][64];
  weftRequest_t req[kOps];
  for (int i = 0; i < kOps; ++i) {
    for (int j = 0; j < 64; ++j) data[i][j] = (float)(rank + i);
    EXPECT_OK(weftAllReduce(data[i], data[i], 64, weftFloat, weftSum, *world, &req[i]));
    calls[i].log = &log;
    calls[i].index = i;
    calls[i].free_here = i % 3 == 1;
    if (i % 3 == 2) EXPECT_OK(weftRequestWait(req[i])); /* finished before the callback is set */
    EXPECT_OK(weftRequestSetCallback(req[i], OnDone, &calls[i]));
    if (i % 3 == 0) EXPECT_OK(weftRequestFree(req[i])); /* freed before it finishes */
  }
  EXPECT_RESULT(weftRequestSetCallback(req[2], OnDone, &calls[2]), weftInvalidUsage);
  EXPECT_RESULT(weftRequestSetCallback(req[2], NULL, NULL), weftInvalidArgument);
  WaitForCallbacks(&log, kOps);
  for (int i = 2; i < kOps; i += 3) EXPECT_OK(weftRequestFree(req[i]));

  for (int i = 0; i < kOps; ++i) {
    CHECK(log.calls[i] == 1);
    CHECK(log.order[i] == i); /* the order they were set in */
    CHECK(data[i][63] == (float)(n * i + n * (n - 1) / 2));
  }
  CHECK(log.not_success == 0 && log.on_main == 0 && log.threads_differ == 0);
  CHECK(log.destroy_result == weftInvalidUsage);

  /* A callback may abort its communicator (here a duplicate; its request needs no peer). */
  weftComm_t dup = Dup(*world);
  weftRequest_t empty = NULL;
  EXPECT_OK(weftAllReduce(NULL, NULL, 0, weftFloat, weftSum, dup, &empty));
  EXPECT_OK(weftRequestSetCallback(empty, AbortIt, &dup));
  for (int waited = 0; waited < 30000 && __atomic_load_n(&dup, __ATOMIC_ACQUIRE) != NULL;
       waited += 5) {
    SleepMs(5);
  }
  CHECK(__atomic_load_n(&dup, __ATOMIC_ACQUIRE) == NULL);
  EXPECT_OK(weftBarrier(*world, NULL)); /* the world is unaffected */
}
