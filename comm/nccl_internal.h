/* Private to the NCCL backend (CUDA builds only): the communicator's context, shared by
 * nccl.c (the pp_comm vtable) and nccl_watch.c (the watchdog thread that polls every
 * live communicator's in-flight operations and ncclCommGetAsyncError, and aborts them
 * all on an error or a timeout). */
#ifndef PP_NCCL_INTERNAL_H
#define PP_NCCL_INTERNAL_H

#include "comm_internal.h"

#include <cuda_runtime.h>
#include <nccl.h>

/* Operations one communicator may have in flight on its stream before an enqueue waits
 * for the oldest to finish (a step has a few per microbatch and bucket). */
#define NCCL_MAX_IN_FLIGHT 256

/* One enqueued operation as the watchdog sees it: an event recorded after it on the
 * communicator's stream, and what to say if it never completes. */
typedef struct nccl_flight {
    cudaEvent_t done;
    double since;          /* pp_now() at enqueue */
    char what[96];         /* "allreduce of 4096 bytes over 2 ranks", "1 send and 1 receive with rank 3 (...)" */
} nccl_flight;

typedef struct nccl_ctx {
    ncclComm_t comm;
    cudaStream_t stream;   /* the communicator's own stream (non-blocking, high priority) */
    cudaStream_t compute;  /* borrowed: the stream the caller's kernels run on (NULL: legacy default) */
    cudaEvent_t ready;     /* recorded on compute before each enqueue; stream waits on it */
    int device;
    const pp_comm *owner;  /* its rank, size and timeout (seconds an operation may stay in flight) */
    float *scratch;        /* device, 1 element: the barrier's all-reduce */
    pp_comm *boot;         /* borrowed: ends the job when the watchdog must */
    int aborted;           /* ncclCommAbort was called: comm is gone (under the watch lock) */
    nccl_flight flight[NCCL_MAX_IN_FLIGHT];    /* ring, oldest at head (stream order) */
    int head, count;
    struct nccl_ctx *next_live;                /* the watchdog's list */
} nccl_ctx;

/* The one lock around every NCCL call that uses a communicator (enqueue, split, destroy)
 * and the watchdog's scans and aborts: ncclCommAbort frees the communicator, so no other
 * call may be inside it then. `what` (a string literal) names the call for the
 * watchdog's message should it block (a split waits for its peers). */
void nccl_lock(const char *what);
void nccl_unlock(void);

/* Registers x with the watchdog (starting its thread with the first) / removes it and
 * destroys its NCCL communicator under the lock (stopping the thread with the last, which
 * also forgets a failure: communicators made afterwards start clean). Without the lock. */
pp_status nccl_watch_add(nccl_ctx *x, pp_error *err);
void nccl_watch_remove(nccl_ctx *x);

/* Records an event after the last enqueued operation on x's stream and files it in the
 * ring, waiting for the oldest to finish when the ring is full. With the lock held. */
pp_status nccl_watch_push(nccl_ctx *x, const char *what, pp_error *err);

/* Nonzero, with err filled ("rank R: ... <the first failure>"), once any communicator of
 * this process has failed: every NCCL communicator is then aborted and every call fails. */
int nccl_failed(const nccl_ctx *x, const char *op, pp_error *err);

/* Records the job's NCCL failure (the first one wins) and aborts every live communicator.
 * With the lock held. */
void nccl_fail_all(const char *msg);

#endif
