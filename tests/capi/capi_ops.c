/* Every operation of the C API, blocking and with requests, checked value by value. */
#include <stdint.h>
#include <stdlib.h>

#include "capi_worker.h"

enum { kM = 37 }; /* elements per block: odd, not a multiple of any vector width */

static void Ranks(weftComm_t comm, int* rank, int* n) {
  EXPECT_OK(weftCommUserRank(comm, rank));
  EXPECT_OK(weftCommCount(comm, n));
}

/* One pass over every collective; async: with requests, waited after all are issued. */
static void CollectivesOnce(weftComm_t comm, int async) {
  int rank, n;
  Ranks(comm, &rank, &n);
  weftRequest_t req[8] = {NULL};
  weftRequest_t* r[8];
  for (int i = 0; i < 8; ++i) r[i] = async ? &req[i] : NULL;

  float sum[kM];
  int64_t max[kM], avg[kM];
  for (int j = 0; j < kM; ++j) {
    sum[j] = (float)(rank + j);
    max[j] = avg[j] = rank + 1;
  }
  EXPECT_OK(weftAllReduce(sum, sum, kM, weftFloat, weftSum, comm, r[0]));
  EXPECT_OK(weftAllReduce(max, max, kM, weftInt64, weftMax, comm, r[1]));
  EXPECT_OK(weftAllReduce(avg, avg, kM, weftInt64, weftAvg, comm, r[2]));

  int32_t* rs_send = malloc(sizeof(int32_t) * kM * n);
  int32_t rs_recv[kM];
  for (int i = 0; i < kM * n; ++i) rs_send[i] = rank * 1000 + i;
  EXPECT_OK(weftReduceScatter(rs_send, rs_recv, kM, weftInt32, weftSum, comm, r[3]));

  double ag_send[kM];
  double* ag_recv = malloc(sizeof(double) * kM * n);
  for (int j = 0; j < kM; ++j) ag_send[j] = rank * 100 + j;
  EXPECT_OK(weftAllGather(ag_send, ag_recv, kM, weftDouble, comm, r[4]));

  uint8_t bc[kM];
  for (int j = 0; j < kM; ++j) bc[j] = rank == n - 1 ? (uint8_t)(7 + j) : 0;
  EXPECT_OK(weftBroadcast(bc, bc, kM, weftUint8, n - 1, comm, r[5]));

  int32_t red_send[kM], red_recv[kM];
  for (int j = 0; j < kM; ++j) red_send[j] = rank * 3 + j;
  EXPECT_OK(weftReduce(red_send, red_recv, kM, weftInt32, weftMax, 0, comm, r[6]));

  int32_t* a2a_send = malloc(sizeof(int32_t) * kM * n);
  int32_t* a2a_recv = malloc(sizeof(int32_t) * kM * n);
  for (int b = 0; b < n; ++b) {
    for (int k = 0; k < kM; ++k) a2a_send[b * kM + k] = rank * 10000 + b * 100 + k;
  }
  EXPECT_OK(weftAllToAll(a2a_send, a2a_recv, kM, weftInt32, comm, r[7]));
  for (int i = 0; i < 8; ++i) Complete(req[i]);
  EXPECT_OK(weftBarrier(comm, NULL));

  for (int j = 0; j < kM; ++j) {
    CHECK(sum[j] == (float)(n * j + n * (n - 1) / 2));
    CHECK(max[j] == n && avg[j] == (n + 1) / 2);
    CHECK(rs_recv[j] == 1000 * n * (n - 1) / 2 + n * (rank * kM + j));
    CHECK(bc[j] == 7 + j);
    if (rank == 0) CHECK(red_recv[j] == (n - 1) * 3 + j);
  }
  for (int b = 0; b < n; ++b) {
    for (int k = 0; k < kM; ++k) {
      CHECK(ag_recv[b * kM + k] == b * 100 + k);
      CHECK(a2a_recv[b * kM + k] == b * 10000 + rank * 100 + k);
    }
  }
  free(rs_send);
  free(ag_recv);
  free(a2a_send);
  free(a2a_recv);
}

void SuiteCollectives(weftComm_t* world) {
  CollectivesOnce(*world, 0);
  CollectivesOnce(*world, 1);
  weftRequest_t req = NULL;
  EXPECT_OK(weftBarrier(*world, &req));
  Complete(req);
}

/* binary16 of a small positive integer. */
static uint16_t Half(int k) {
  int e = 0;
  while ((k >> (e + 1)) != 0) ++e;
  return (uint16_t)(((e + 15) << 10) | ((k << (10 - e)) & 0x3FF));
}

/* Every C type maps to its Weft type: a sum of ones is the rank count, in that type's bits. */
void SuiteTypes(weftComm_t* world) {
  int rank, n;
  Ranks(*world, &rank, &n);
  const struct {
    weftDataType_t type;
    size_t size;
  } kTypes[] = {{weftInt8, 1},    {weftUint8, 1},   {weftInt32, 4},   {weftUint32, 4},
                {weftInt64, 8},   {weftUint64, 8},  {weftFloat16, 2}, {weftFloat32, 4},
                {weftFloat64, 8}, {weftBfloat16, 2}};
  for (size_t t = 0; t < sizeof kTypes / sizeof kTypes[0]; ++t) {
    unsigned char one[8] = {0}, want[8] = {0};
    const float f1 = 1.0f, fn = (float)n;
    const double d1 = 1.0, dn = (double)n;
    switch (kTypes[t].type) {
      case weftFloat16: {
        const uint16_t h1 = Half(1), hn = Half(n);
        memcpy(one, &h1, 2);
        memcpy(want, &hn, 2);
        break;
      }
      case weftBfloat16: {
        uint32_t b1, bn;
        memcpy(&b1, &f1, 4);
        memcpy(&bn, &fn, 4);
        const uint16_t h1 = (uint16_t)(b1 >> 16), hn = (uint16_t)(bn >> 16);
        memcpy(one, &h1, 2);
        memcpy(want, &hn, 2);
        break;
      }
      case weftFloat32:
        memcpy(one, &f1, 4);
        memcpy(want, &fn, 4);
        break;
      case weftFloat64:
        memcpy(one, &d1, 8);
        memcpy(want, &dn, 8);
        break;
      default:
        one[0] = 1; /* little-endian integers */
        want[0] = (unsigned char)n;
    }
    unsigned char got[8] = {0};
    EXPECT_OK(weftAllReduce(one, got, 1, kTypes[t].type, weftSum, *world, NULL));
    if (memcmp(got, want, kTypes[t].size) != 0) {
      ++failures;
      fprintf(stderr, "FAIL type %d: the sum of ones is not %d\n", (int)kTypes[t].type, n);
    }
  }
  /* And every operator, NCCL's numbering (max 2, min 3). */
  int32_t v = rank + 2, prod = 0, mx = 0, mn = 0, expect_prod = 1;
  for (int r = 0; r < n; ++r) expect_prod *= r + 2;
  EXPECT_OK(weftAllReduce(&v, &prod, 1, weftInt32, weftProd, *world, NULL));
  EXPECT_OK(weftAllReduce(&v, &mx, 1, weftInt32, weftMax, *world, NULL));
  EXPECT_OK(weftAllReduce(&v, &mn, 1, weftInt32, weftMin, *world, NULL));
  CHECK(prod == expect_prod && mx == n + 1 && mn == 2);
}
