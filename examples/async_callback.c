/* Asynchronous all-reduces: requests, polling, waiting, and completion callbacks.
 *
 *   weftrun -n 2 build/examples/example_async_callback
 *
 * Issues several all-reduces at once (as a data-parallel trainer issues gradient buckets), does
 * other work while they run, and learns of each completion from a callback.
 */
#define _POSIX_C_SOURCE 200809L /* pthreads */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/comm/weft.h>

#include "weft_check.h"

enum { kBuckets = 8, kCount = 50000 };

/* What the callbacks report to the main thread. */
struct Completions {
  pthread_mutex_t mu;
  pthread_cond_t changed;
  int calls[kBuckets];
  int done;
  int failed;
  int on_main_thread;
  pthread_t main_thread;
};

struct Bucket {
  struct Completions* completions;
  int index;
};

/* Runs on the communicator's callback thread, once per request, after the all-reduce. */
static void OnDone(weftRequest_t request, weftResult_t result, void* user_data) {
  struct Bucket* bucket = user_data;
  struct Completions* c = bucket->completions;
  (void)request;
  pthread_mutex_lock(&c->mu);
  c->calls[bucket->index]++;
  c->done++;
  if (result != weftSuccess) c->failed++;
  if (pthread_equal(pthread_self(), c->main_thread)) c->on_main_thread++;
  pthread_cond_signal(&c->changed);
  pthread_mutex_unlock(&c->mu);
}

int main(void) {
  weftComm_t comm;
  int rank, nranks;
  WEFTCHECK(weftCommInitFromEnv(&comm, NULL));
  WEFTCHECK(weftCommUserRank(comm, &rank));
  WEFTCHECK(weftCommCount(comm, &nranks));

  struct Completions completions = {
      PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0, pthread_self()};
  struct Bucket buckets[kBuckets];
  weftRequest_t requests[kBuckets];
  double* grads = malloc(sizeof(double) * kBuckets * kCount);
  if (grads == NULL) return EXIT_FAILURE;
  for (size_t i = 0; i < (size_t)kBuckets * kCount; ++i) grads[i] = rank + (double)(i % 7);

  /* Issue every bucket; each call returns at once with a request. */
  for (int b = 0; b < kBuckets; ++b) {
    double* bucket = grads + (size_t)b * kCount;
    WEFTCHECK(weftAllReduce(bucket, bucket, kCount, weftDouble, weftAvg, comm, &requests[b]));
    buckets[b].completions = &completions;
    buckets[b].index = b;
    WEFTCHECK(weftRequestSetCallback(requests[b], OnDone, &buckets[b]));
  }

  /* Other work while they run; weftRequestTest never blocks. */
  long polls = 0;
  while (weftRequestTest(requests[kBuckets - 1]) == weftInProgress) ++polls;

  /* Waiting returns the result; the callback may still be running then. */
  for (int b = 0; b < kBuckets; ++b) {
    WEFTCHECK(weftRequestWait(requests[b]));
    WEFTCHECK(weftRequestFree(requests[b]));
  }
  pthread_mutex_lock(&completions.mu);
  while (completions.done < kBuckets) pthread_cond_wait(&completions.changed, &completions.mu);
  pthread_mutex_unlock(&completions.mu);

  /* The average of rank + i % 7 over the ranks. */
  const double mean_rank = (nranks - 1) / 2.0;
  int wrong = 0;
  for (size_t i = 0; i < (size_t)kBuckets * kCount; ++i) {
    wrong += grads[i] != mean_rank + (double)(i % 7);
  }
  int once = 1;
  for (int b = 0; b < kBuckets; ++b) once = once && completions.calls[b] == 1;
  printf("rank %d: %d all-reduces %s; callbacks: each once %s, failed %d, on the main thread %d\n",
         rank, kBuckets, wrong == 0 ? "ok" : "WRONG", once ? "yes" : "NO", completions.failed,
         completions.on_main_thread);
  (void)polls;

  free(grads);
  WEFTCHECK(weftCommDestroy(comm));
  return wrong == 0 && once && completions.failed == 0 && completions.on_main_thread == 0
             ? EXIT_SUCCESS
             : EXIT_FAILURE;
}
