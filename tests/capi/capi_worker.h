/* One rank of a C API test (capi_test.cc starts the job under weftrun). Written in C99 against
 * weft.h alone, as a user's program would be. Each suite checks and counts failures; the worker
 * prints every failure and exits non-zero if there was one. */
#ifndef WEFT_TESTS_CAPI_WORKER_H_
#define WEFT_TESTS_CAPI_WORKER_H_

#include <stdio.h>
#include <string.h>
#include <weft/comm/weft.h>

extern int failures;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      ++failures;                                                     \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

/* `call` must return `expected`. */
#define EXPECT_RESULT(call, expected)                                                             \
  do {                                                                                            \
    weftResult_t r_ = (call);                                                                     \
    if (r_ != (expected)) {                                                                       \
      ++failures;                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s returned %d (%s), not %s: %s\n", __FILE__, __LINE__, #call, \
              (int)r_, weftGetErrorString(r_), #expected, weftGetLastError(NULL));                \
    }                                                                                             \
  } while (0)

#define EXPECT_OK(call) EXPECT_RESULT(call, weftSuccess)

/* The thread's last error must contain `text`. */
#define EXPECT_MESSAGE(text)                                                                   \
  do {                                                                                         \
    if (strstr(weftGetLastError(NULL), (text)) == NULL) {                                      \
      ++failures;                                                                              \
      fprintf(stderr, "FAIL %s:%d: last error lacks \"%s\": %s\n", __FILE__, __LINE__, (text), \
              weftGetLastError(NULL));                                                         \
    }                                                                                          \
  } while (0)

/* Finishes an operation issued with `request` (async) or without (request was NULL). */
void Complete(weftRequest_t request);

/* A communicator with the same ranks as `comm`, for traffic that must not queue behind it. */
weftComm_t Dup(weftComm_t comm);

void SleepMs(int ms);

/* Suites: each gets the world communicator from the environment and may take it (setting
 * *world to NULL), which the worker otherwise destroys. */
void SuiteCollectives(weftComm_t* world);
void SuiteTypes(weftComm_t* world);
void SuiteVariableCounts(weftComm_t* world);
void SuiteP2pAndGroups(weftComm_t* world);
void SuiteSplitAndIds(weftComm_t* world);
void SuiteRequests(weftComm_t* world);
void SuiteCallbacks(weftComm_t* world);
void SuiteArgumentErrors(weftComm_t* world);
void SuiteCreationErrors(weftComm_t* world);
void SuitePeerDies(weftComm_t* world);
void SuiteAbort(weftComm_t* world);

#endif /* WEFT_TESTS_CAPI_WORKER_H_ */
