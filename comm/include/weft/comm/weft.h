/* Weft's C API: collectives between processes, shaped like NCCL's.
 *
 *   weftComm_t comm;
 *   WEFTCHECK(weftCommInitFromEnv(&comm, NULL));             // under weftrun, mpirun, torchrun
 *   WEFTCHECK(weftAllReduce(x, x, n, weftFloat, weftSum, comm, NULL));   // NULL: blocking
 *   weftRequest_t req;
 *   WEFTCHECK(weftAllReduce(g, g, n, weftFloat, weftAvg, comm, &req));   // asynchronous
 *   ... compute ...
 *   WEFTCHECK(weftRequestWait(req));
 *   weftRequestFree(req);
 *   weftCommDestroy(comm);
 *
 * Buffers are host memory; counts are in elements; in-place means equal send and receive
 * pointers (for reduce-scatter and all-gather: the rank's block of the large buffer). Every rank
 * issues the same collectives in the same order with the same count, type, operator and root.
 * Where NCCL takes a stream, Weft takes `weftRequest_t* request`: NULL makes the call return once
 * the operation has finished; otherwise the call returns at once and *request tracks it. The
 * buffers must stay valid and untouched until the operation finishes.
 *
 * Errors: every function returns a weftResult_t. A failed call sets the calling thread's last
 * error message (weftGetLastError), which names this rank, the operation and its sequence
 * number, and the peer where one is involved. A call that fails returns no request (*request is
 * NULL). Once an operation fails, the communicator is in error: later operations fail too, with
 * the same code, and weftCommGetAsyncError reports it; destroy or abort it.
 *
 * Thread safety:
 *  - weftGetVersion, weftGetErrorString, weftGetLastError, weftGetUniqueId and the weftCommInit*
 *    functions may be called from any thread at any time.
 *  - Issuing operations on one communicator (collectives, weftSend/weftRecv, weftCommSplit) must
 *    be done by one thread at a time: the order of issue is what the ranks match.
 *  - Groups are per thread, as in NCCL: weftGroupStart/weftGroupEnd bracket the calls this thread
 *    makes, on any communicators.
 *  - weftCommAbort, weftCommGetAsyncError and the weftRequest* functions may be called from any
 *    thread, concurrently with anything except weftCommDestroy of the same communicator.
 *  - weftCommDestroy: no other thread may use the communicator during or after the call.
 *  - Completion callbacks run on a thread the communicator owns (one per communicator, started
 *    with its first callback), one at a time, in the order they were set.
 *
 * Values of weftResult_t, weftDataType_t and weftRedOp_t equal NCCL's where both have them.
 * The header is C99 and includes only standard headers.
 */
#ifndef WEFT_COMM_WEFT_H_
#define WEFT_COMM_WEFT_H_

#include <stddef.h>
#include <stdint.h>

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
/* As NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch. */
#define WEFT_VERSION_CODE (WEFT_MAJOR * 10000 + WEFT_MINOR * 100 + WEFT_PATCH)

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles. */
typedef struct weftComm* weftComm_t;
typedef struct weftRequest* weftRequest_t;

typedef enum {
  weftSuccess = 0,
  weftSystemError = 2,     /* the operating system refused something (memory, sockets, files) */
  weftInternalError = 3,   /* a bug in Weft */
  weftInvalidArgument = 4, /* a bad pointer, count, type, operator, rank or handle */
  weftInvalidUsage = 5,    /* a call out of order, or ranks that issued different operations */
  weftRemoteError = 6,     /* another rank failed, exited or sent something unexpected */
  weftInProgress = 7,      /* weftRequestTest: the operation is still running */
  weftTimeout = 8,         /* an operation or the creation passed its deadline (WEFT_TIMEOUT) */
  weftAborted = 9,         /* the communicator was aborted */
  weftNumResults = 10
} weftResult_t;

typedef enum {
  weftInt8 = 0,
  weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2,
  weftInt = 2,
  weftUint32 = 3,
  weftInt64 = 4,
  weftUint64 = 5,
  weftFloat16 = 6,
  weftHalf = 6,
  weftFloat32 = 7,
  weftFloat = 7,
  weftFloat64 = 8,
  weftDouble = 8,
  weftBfloat16 = 9,
  weftNumTypes = 10
} weftDataType_t;

typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMax = 2,
  weftMin = 3,
  weftAvg = 4, /* sum divided by the rank count; truncating for integers, as NCCL */
  weftNumOps = 5
} weftRedOp_t;

/* Passed as color to weftCommSplit: this rank joins no new communicator. */
#define WEFT_SPLIT_NOCOLOR (-1)

/* ---- Library ---- */

/* *version = WEFT_VERSION_CODE of the library actually loaded. */
WEFT_API weftResult_t weftGetVersion(int* version);
/* A short constant description of a result code ("invalid argument"). */
WEFT_API const char* weftGetErrorString(weftResult_t result);
/* The full message of the last call that failed on this thread ("" if none); valid until this
 * thread's next failing call. Inside a completion callback: the message of that request's
 * failure. `comm` is unused and may be NULL (kept for NCCL's shape). */
WEFT_API const char* weftGetLastError(weftComm_t comm);

/* ---- Configuration ---- */

/* Optional settings for the weftCommInit* functions and weftCommSplit. Initialise with
 * WEFT_CONFIG_INITIALIZER, then set fields: every field left at its initial value takes its
 * WEFT_* environment variable (README.md lists them), then the built-in default. */
typedef struct {
  size_t size;           /* set by the initializer; fields appear only at the end */
  unsigned int magic;    /* set by the initializer */
  unsigned int version;  /* set by the initializer */
  int64_t timeout_ms;    /* bound on every operation and on creation; 0: WEFT_TIMEOUT, 300 s */
  const char* algorithm; /* NULL: WEFT_ALGO ("ring", "all_reduce=ring,broadcast=tree", ...) */
  const char* transport; /* NULL: WEFT_TRANSPORT ("auto", "tcp", "shm", "ucx") */
  int shared_buffers;    /* -1: WEFT_SHARED_BUFFERS; 0 or 1: see weft/comm/communicator.h */
} weftConfig_t;

#define WEFT_CONFIG_MAGIC 0x77656674u /* "weft" */
#define WEFT_CONFIG_INITIALIZER \
  { sizeof(weftConfig_t), WEFT_CONFIG_MAGIC, WEFT_VERSION_CODE, 0, NULL, NULL, -1 }

/* ---- Creating and ending communicators ---- */

#define WEFT_UNIQUE_ID_BYTES 256
/* The rendezvous of a new communicator: a NUL-terminated string holding the creator's address
 * and the job's secret token. Hand it to every rank by your own means (MPI_Bcast, a file). */
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

/* Makes a new id and starts its rendezvous server in this process, which must be the process
 * of rank 0; the server lives as long as rank 0's communicator. */
WEFT_API weftResult_t weftGetUniqueId(weftUniqueId* uniqueId);
/* Collective over nranks processes: rank `rank` of the communicator of `commId`. */
WEFT_API weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank);
/* As weftCommInitRank; `config` may be NULL. */
WEFT_API weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId,
                                             int rank, const weftConfig_t* config);
/* From the launcher's environment: weftrun, torchrun-style variables, Open MPI, PMI, Slurm.
 * `config` may be NULL. */
WEFT_API weftResult_t weftCommInitFromEnv(weftComm_t* comm, const weftConfig_t* config);

/* A framework's own key-value store, used only to carry the unique id from rank 0 to the
 * others (the communicator then connects through its own rendezvous server). Keys are
 * NUL-terminated; values are bytes. The callbacks return weftSuccess, or a code for a failure
 * (weftTimeout when get's key did not appear in time), which weftCommInitWithStore then
 * returns. They are called on the thread that calls weftCommInitWithStore. */
typedef struct {
  void* ctx; /* passed to both callbacks */
  /* Stores `len` bytes under `key`. */
  weftResult_t (*set)(void* ctx, const char* key, const void* value, size_t len);
  /* Waits up to timeout_ms for `key` to be set, then copies up to `cap` bytes of its value into
   * `buf` and sets *len to the value's full length. */
  weftResult_t (*get)(void* ctx, const char* key, void* buf, size_t cap, size_t* len,
                      int64_t timeout_ms);
} weftStore_t;

/* Collective over nranks processes that share `store`: rank 0 makes a unique id and sets it in
 * the store under "weft/unique_id/<n>", where n counts the communicators this process has made
 * from a store with this ctx; the other ranks get it (waiting up to the creation timeout), then
 * all create the communicator as weftCommInitRank does. Ranks sharing a store must therefore
 * make their communicators from it in the same order; give each group of ranks its own store
 * view (a key prefix, as torch's PrefixStore). The value holds the job's secret: whoever can read
 * the store can join. */
WEFT_API weftResult_t weftCommInitWithStore(weftComm_t* comm, const weftStore_t* store, int rank,
                                            int nranks);
/* As weftCommInitWithStore; `config` may be NULL. */
WEFT_API weftResult_t weftCommInitWithStoreConfig(weftComm_t* comm, const weftStore_t* store,
                                                  int rank, int nranks, const weftConfig_t* config);

/* Collective over `comm`: ranks passing the same color form *newcomm, ordered by (key, rank).
 * color WEFT_SPLIT_NOCOLOR sets *newcomm to NULL. config NULL: the parent's configuration. */
WEFT_API weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                                    const weftConfig_t* config);

/* Finishes the pending operations (each bounded by its deadline), runs the pending callbacks
 * (which must no longer use the communicator), and frees it. Not from one of its own callbacks
 * (weftInvalidUsage). */
WEFT_API weftResult_t weftCommDestroy(weftComm_t comm);
/* Ends every pending operation with weftAborted, promptly, and frees the communicator; calls in
 * progress on other threads return weftAborted. The handle is invalid afterwards. Returns once
 * the pending callbacks have run, unless called from a callback or while another thread is still
 * inside a call on it (then the last of those finishes the job). */
WEFT_API weftResult_t weftCommAbort(weftComm_t comm);
/* *asyncError = the code of the communicator's first failed operation, weftSuccess while none
 * has failed; weftGetLastError then gives its message. Never blocks. */
WEFT_API weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError);
WEFT_API weftResult_t weftCommCount(weftComm_t comm, int* count);
WEFT_API weftResult_t weftCommUserRank(weftComm_t comm, int* rank);

/* ---- Collectives (request NULL: blocking; see the top of this file) ---- */

WEFT_API weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                    weftRequest_t* request);
/* sendbuff holds nranks blocks of recvcount elements; rank r receives the reduced block r. */
WEFT_API weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                        weftRequest_t* request);
/* recvbuff receives nranks blocks of sendcount elements; block r is rank r's sendbuff. */
WEFT_API weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    weftDataType_t datatype, weftComm_t comm,
                                    weftRequest_t* request);
/* sendbuff is read on the root only. */
WEFT_API weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    weftDataType_t datatype, int root, weftComm_t comm,
                                    weftRequest_t* request);
/* recvbuff is written on the root only. */
WEFT_API weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm,
                                 weftRequest_t* request);
/* Block j (count elements) of sendbuff goes to rank j, whose recvbuff block r receives it from
 * rank r. */
WEFT_API weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                   weftDataType_t datatype, weftComm_t comm,
                                   weftRequest_t* request);
WEFT_API weftResult_t weftBarrier(weftComm_t comm, weftRequest_t* request);

/* Variable counts (MPI's v-collectives): every array has nranks entries, in elements; counts
 * may be 0, and receive blocks may lie in any order but must not overlap.
 * All-gather: rank r's sendcount elements land at recvdispls[r] in every rank's recvbuff;
 * recvcounts[r] equals rank r's sendcount, and every rank passes the same recvcounts.
 * In place: sendbuff == recvbuff + recvdispls[rank] elements. */
WEFT_API weftResult_t weftAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                     const size_t* recvcounts, const size_t* recvdispls,
                                     weftDataType_t datatype, weftComm_t comm,
                                     weftRequest_t* request);
/* sendbuff holds nranks blocks back to back, block r of recvcounts[r] elements (the same
 * recvcounts on every rank); rank r receives the reduced block r. In place: recvbuff ==
 * sendbuff + the elements of the blocks before block rank. */
WEFT_API weftResult_t weftReduceScatterV(const void* sendbuff, void* recvbuff,
                                         const size_t* recvcounts, weftDataType_t datatype,
                                         weftRedOp_t op, weftComm_t comm, weftRequest_t* request);
/* sendcounts[j] elements at senddispls[j] go to rank j, which receives them at its
 * recvdispls[r] (recvcounts[r] elements, which must equal rank r's sendcounts[j]) from rank r. */
WEFT_API weftResult_t weftAllToAllV(const void* sendbuff, const size_t* sendcounts,
                                    const size_t* senddispls, void* recvbuff,
                                    const size_t* recvcounts, const size_t* recvdispls,
                                    weftDataType_t datatype, weftComm_t comm,
                                    weftRequest_t* request);

/* ---- Point-to-point ---- */

/* Messages between two ranks arrive in the order they were sent; a receive must match the next
 * message from that peer in size. Inside a group, any pattern of sends and receives completes. */
WEFT_API weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype,
                               int peer, weftComm_t comm, weftRequest_t* request);
WEFT_API weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                               weftComm_t comm, weftRequest_t* request);

/* Between weftGroupStart and weftGroupEnd (nestable, per thread) operations are collected, not
 * issued; requests handed out inside finish with their group. weftGroupEnd issues each
 * communicator's group as one operation, then waits for the groups that hold operations issued
 * without a request, and returns the first error. */
WEFT_API weftResult_t weftGroupStart(void);
WEFT_API weftResult_t weftGroupEnd(void);

/* ---- Requests ---- */

/* weftInProgress while the operation runs; afterwards its result. Never blocks. */
WEFT_API weftResult_t weftRequestTest(weftRequest_t request);
/* Blocks until the operation finishes (each operation is bounded by the communicator's
 * timeout), and returns its result. Several threads may wait on one request. */
WEFT_API weftResult_t weftRequestWait(weftRequest_t request);

/* Called exactly once per request it is set on, after the operation finishes, with its result,
 * on the communicator's callback thread (even when the operation had finished already). It may
 * call any function except weftCommDestroy on that communicator, and may free the request. */
typedef void (*weftCallback_t)(weftRequest_t request, weftResult_t result, void* userData);
/* At most once per request (weftInvalidUsage after). */
WEFT_API weftResult_t weftRequestSetCallback(weftRequest_t request, weftCallback_t callback,
                                             void* userData);
/* Releases the handle; the operation runs on and its callback still fires (the handle stays
 * valid until the callback returns). Every request handed out must be freed once. */
WEFT_API weftResult_t weftRequestFree(weftRequest_t request);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMM_WEFT_H_ */
