/*   capi_worker SUITE   (under weftrun -n N) */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "capi_worker.h"

#include <stdlib.h>
#include <time.h>

int failures = 0;

void Complete(weftRequest_t request) {
  if (request == NULL) return;
  EXPECT_OK(weftRequestWait(request));
  EXPECT_OK(weftRequestFree(request));
}

weftComm_t Dup(weftComm_t comm) {
  int rank = 0;
  weftComm_t dup = NULL;
  EXPECT_OK(weftCommUserRank(comm, &rank));
  EXPECT_OK(weftCommSplit(comm, 0, rank, &dup, NULL));
  return dup;
}

void SleepMs(int ms) {
  const struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

static const struct {
  const char* name;
  void (*run)(weftComm_t* world);
} kSuites[] = {
    {"collectives", SuiteCollectives},
    {"types", SuiteTypes},
    {"vcoll", SuiteVariableCounts},
    {"p2p_groups", SuiteP2pAndGroups},
    {"split_ids", SuiteSplitAndIds},
    {"requests", SuiteRequests},
    {"callbacks", SuiteCallbacks},
    {"argument_errors", SuiteArgumentErrors},
    {"creation_errors", SuiteCreationErrors},
    {"peer_dies", SuitePeerDies},
    {"abort", SuiteAbort},
};

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: capi_worker SUITE\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof kSuites / sizeof kSuites[0]; ++i) {
    if (strcmp(argv[1], kSuites[i].name) != 0) continue;
    weftComm_t world = NULL;
    EXPECT_OK(weftCommInitFromEnv(&world, NULL));
    if (world == NULL) return 1;
    kSuites[i].run(&world);
    if (world != NULL) EXPECT_OK(weftCommDestroy(world));
    int rank = -1;
    const char* env = getenv("WEFT_RANK");
    if (env != NULL) rank = atoi(env);
    printf("rank %d: suite %s: %d failures\n", rank, argv[1], failures);
    return failures == 0 ? 0 : 1;
  }
  fprintf(stderr, "unknown suite %s\n", argv[1]);
  return 2;
}
