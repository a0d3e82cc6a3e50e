/* Creating communicators through a framework's own key-value store.
 *
 *   weftrun -n 3 build/examples/example_store_rendezvous /tmp/some-empty-directory
 *
 * The "framework" here keeps its store in files of a directory that every rank sees, and
 * knows each process's rank and the job size (from weftrun's WEFT_RANK and WEFT_SIZE, as it
 * would from its own launcher). Weft sets one key in it, rank 0's unique id, per communicator.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/comm/weft.h>

#include "weft_check.h"

/* The file of `key` in directory `dir` ('/' in keys becomes '_'). */
static void KeyPath(const char* dir, const char* key, char* path, size_t cap) {
  snprintf(path, cap, "%s/", dir);
  size_t n = strlen(path);
  for (; *key != '\0' && n + 1 < cap; ++key) path[n++] = *key == '/' ? '_' : *key;
  path[n] = '\0';
}

/* Writes a temporary file and renames it: a reader sees the whole value or nothing. */
static weftResult_t FileSet(void* ctx, const char* key, const void* value, size_t len) {
  char path[4096], tmp[4200];
  KeyPath(ctx, key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) return weftSystemError;
  const int ok = fwrite(value, 1, len, f) == len;
  if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) return weftSystemError;
  return weftSuccess;
}

static weftResult_t FileGet(void* ctx, const char* key, void* buf, size_t cap, size_t* len,
                            int64_t timeout_ms) {
  char path[4096];
  KeyPath(ctx, key, path, sizeof path);
  const struct timespec pause = {0, 10 * 1000 * 1000};
  for (int64_t waited_ms = 0;; waited_ms += 10) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      *len = fread(buf, 1, cap, f);
      const int more = fgetc(f) != EOF; /* longer than cap: report a length past it */
      fclose(f);
      if (more) *len = cap + 1;
      return weftSuccess;
    }
    if (errno != ENOENT) return weftSystemError;
    if (waited_ms >= timeout_ms) return weftTimeout;
    nanosleep(&pause, NULL);
  }
}

int main(int argc, char** argv) {
  const char* rank_env = getenv("WEFT_RANK");
  const char* size_env = getenv("WEFT_SIZE");
  if (argc != 2 || rank_env == NULL || size_env == NULL) {
    fprintf(stderr, "usage: weftrun -n N %s EMPTY_SHARED_DIRECTORY\n", argv[0]);
    return EXIT_FAILURE;
  }
  const int rank = atoi(rank_env), nranks = atoi(size_env);
  weftStore_t store = {argv[1], FileSet, FileGet};

  /* Two communicators from one store: the ranks make them in the same order. */
  weftComm_t first, second;
  WEFTCHECK(weftCommInitWithStore(&first, &store, rank, nranks));
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeout_ms = 60 * 1000;
  WEFTCHECK(weftCommInitWithStoreConfig(&second, &store, rank, nranks, &config));

  int64_t value = rank + 1, sum = 0, max = 0;
  WEFTCHECK(weftAllReduce(&value, &sum, 1, weftInt64, weftSum, first, NULL));
  WEFTCHECK(weftAllReduce(&value, &max, 1, weftInt64, weftMax, second, NULL));
  const int ok = sum == (int64_t)nranks * (nranks + 1) / 2 && max == nranks;
  printf("rank %d: two communicators through the store: sum %lld, max %lld: %s\n", rank,
         (long long)sum, (long long)max, ok ? "ok" : "WRONG");

  WEFTCHECK(weftCommDestroy(second));
  WEFTCHECK(weftCommDestroy(first));
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
