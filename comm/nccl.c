/* The NCCL backend of pp_comm (device buffers; CUDA builds only). Every communicator has
 * its own stream. Before an operation is enqueued there, that stream waits on an event
 * recorded on the caller's compute stream, so the kernels that wrote a send buffer (or
 * last read a receive buffer) come first; a wait makes the compute stream wait on the
 * operation's event, so the host never blocks in the step and an all-reduce overlaps the
 * kernels queued after it. Operations are enqueued when they are posted, in the order
 * posted: the schedule's lowering orders every rank's messages by one global key, which
 * is what keeps NCCL's in-order streams from waiting on each other in a cycle. Timeouts
 * and asynchronous errors are the watchdog's (nccl_watch.c). */
#include "nccl_internal.h"

#include <onnxpipe/comm_nccl.h>
#include <onnxpipe/core_util.h>

#include <stdio.h>
#include <stdlib.h>

typedef struct nccl_req {
    cudaEvent_t done;
    const char *op;        /* "send", "recv", "allreduce", ... */
    size_t bytes;
} nccl_req;

typedef enum { COLL_ALLREDUCE, COLL_BROADCAST, COLL_ALLGATHER } coll_kind;

static nccl_ctx *ctx_of(const pp_comm *c)
{
    return c->ctx;
}

static const char *nccl_name(const pp_comm *c)
{
    (void)c;
    return "nccl";
}

static pp_status cuda_fail(const pp_comm *c, cudaError_t e, const char *what, pp_error *err)
{
    return pp_error_set(err, PP_ERR_DEVICE, "rank %d (nccl, cuda device %d): %s failed: %s", c->rank,
                        ctx_of(c)->device, what, cudaGetErrorString(e));
}

static pp_status nccl_fail(const pp_comm *c, ncclResult_t r, const char *what, pp_error *err)
{
    return pp_error_set(err, PP_ERR_COMM, "rank %d (nccl, cuda device %d): %s failed: %s", c->rank,
                        ctx_of(c)->device, what, ncclGetErrorString(r));
}

/* Before the lock: a call after a failure fails at once (the watchdog may hold the lock
 * inside a hung abort). */
static pp_status refuse(pp_comm *c, const char *op, pp_error *err)
{
    return nccl_failed(ctx_of(c), op, err) ? PP_ERR_COMM : PP_OK;
}

/* Under the lock, before anything is enqueued: a live communicator on the right device,
 * whose stream waits for the kernels already queued on the compute stream. */
static pp_status begin(pp_comm *c, const char *op, pp_error *err)
{
    nccl_ctx *x = ctx_of(c);
    if (nccl_failed(x, op, err)) return PP_ERR_COMM;
    cudaError_t e = cudaSetDevice(x->device);
    if (e == cudaSuccess) e = cudaEventRecord(x->ready, x->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(x->stream, x->ready, 0);
    return e == cudaSuccess ? PP_OK : cuda_fail(c, e, "ordering the nccl stream after the compute stream", err);
}

/* Under the lock, after the NCCL call: the request with its completion event, filed with
 * the watchdog; then unlocks. A failure leaves the communicators in an unknown state, so
 * they are all aborted (the job is lost). */
static pp_status end(pp_comm *c, pp_status st, const char *op, size_t bytes, const char *what, nccl_req **req,
                     pp_error *err)
{
    nccl_req *q = NULL;
    if (st == PP_OK && !(q = pp_calloc(1, sizeof *q)))
        st = pp_error_set(err, PP_ERR_NOMEM, "rank %d: nccl %s: out of memory for the request", c->rank, op);
    cudaError_t e = cudaSuccess;
    if (st == PP_OK) {
        *q = (nccl_req){.op = op, .bytes = bytes};
        e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventRecord(q->done, ctx_of(c)->stream);
        if (e != cudaSuccess) st = cuda_fail(c, e, "recording a completion event", err);
    }
    if (st == PP_OK) st = nccl_watch_push(ctx_of(c), what, err);
    if (st != PP_OK) {
        if (q && q->done) cudaEventDestroy(q->done);
        free(q);
        q = NULL;
        nccl_fail_all(err ? err->msg : "a NCCL call failed");
    }
    nccl_unlock();
    *req = q;
    return st;
}

static void free_req(nccl_req *q)
{
    cudaEventDestroy(q->done);   /* also while recorded and pending: CUDA releases it once complete */
    free(q);
}

static pp_status p2p(pp_comm *c, int send, void *buf, size_t bytes, int peer, pp_request **req, pp_error *err)
{
    const char *op = send ? "send" : "recv";
    PP_CHECK(refuse(c, op, err));
    nccl_ctx *x = ctx_of(c);
    char what[96];
    snprintf(what, sizeof what, "%s of %zu bytes %s rank %d", op, bytes, send ? "to" : "from", peer);
    nccl_lock(send ? "ncclSend" : "ncclRecv");
    pp_status st = begin(c, op, err);
    if (st == PP_OK) {
        ncclResult_t r = send ? ncclSend(buf, bytes, ncclUint8, peer, x->comm, x->stream)
                              : ncclRecv(buf, bytes, ncclUint8, peer, x->comm, x->stream);
        if (r != ncclSuccess) st = nccl_fail(c, r, send ? "ncclSend" : "ncclRecv", err);
    }
    return end(c, st, op, bytes, what, (nccl_req **)req, err);
}

static pp_status nccl_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                            pp_error *err)
{
    (void)tag;
    return p2p(c, 1, (void *)buf, bytes, peer, req, err);
}

static pp_status nccl_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err)
{
    (void)tag;
    return p2p(c, 0, buf, bytes, peer, req, err);
}

/* Enqueues one collective and returns its request. */
static pp_status collective(pp_comm *c, coll_kind kind, const void *in, void *out, size_t count, ncclDataType_t type,
                            int root, const char *op, size_t bytes, nccl_req **req, pp_error *err)
{
    PP_CHECK(refuse(c, op, err));
    nccl_ctx *x = ctx_of(c);
    char what[96];
    snprintf(what, sizeof what, "%s of %zu bytes over %d ranks", op, bytes, c->size);
    nccl_lock(kind == COLL_ALLREDUCE ? "ncclAllReduce" : kind == COLL_BROADCAST ? "ncclBroadcast" : "ncclAllGather");
    pp_status st = begin(c, op, err);
    if (st == PP_OK) {
        ncclResult_t r = kind == COLL_ALLREDUCE ? ncclAllReduce(in, out, count, type, ncclSum, x->comm, x->stream)
                         : kind == COLL_BROADCAST ? ncclBroadcast(in, out, count, type, root, x->comm, x->stream)
                                                  : ncclAllGather(in, out, count, type, x->comm, x->stream);
        if (r != ncclSuccess) st = nccl_fail(c, r, op, err);
    }
    return end(c, st, op, bytes, what, req, err);
}

/* The compute stream waits for q (the host does not), then q is freed. */
static pp_status nccl_wait(pp_comm *c, pp_request *req, pp_error *err)
{
    nccl_req *q = (nccl_req *)req;
    pp_status st = refuse(c, q->op, err);
    if (st == PP_OK) {
        cudaError_t e = cudaStreamWaitEvent(ctx_of(c)->compute, q->done, 0);
        if (e != cudaSuccess) st = cuda_fail(c, e, "ordering the compute stream after nccl", err);
    }
    free_req(q);
    return st;
}

static pp_status nccl_test(pp_comm *c, pp_request *req, int *done, pp_error *err)
{
    nccl_req *q = (nccl_req *)req;
    *done = 0;
    PP_CHECK(refuse(c, q->op, err));
    cudaError_t e = cudaEventQuery(q->done);
    *done = e == cudaSuccess;
    return e == cudaSuccess || e == cudaErrorNotReady ? PP_OK : cuda_fail(c, e, q->op, err);
}

static pp_status nccl_check(pp_comm *c, pp_error *err)
{
    return refuse(c, "check after the step", err);
}

/* The blocking collectives (set-up and export, not the step) also wait on the host, up to
 * the communicator's timeout. */
static pp_status host_wait(pp_comm *c, nccl_req *q, pp_error *err)
{
    double t0 = pp_now();
    for (;;) {
        int done = 0;
        pp_status st = nccl_test(c, (pp_request *)q, &done, err);
        if (st != PP_OK || done) return st == PP_OK ? nccl_wait(c, (pp_request *)q, err) : (free_req(q), st);
        double waited = pp_now() - t0;
        if (waited > c->timeout) {
            pp_error_set(err, PP_ERR_TIMEOUT,
                         "rank %d: waited %.1f s for nccl %s of %zu bytes over %d ranks; is every rank alive and "
                         "calling it? (PP_COMM_TIMEOUT=%g s; the NCCL communicators were aborted)",
                         c->rank, waited, q->op, q->bytes, c->size, c->timeout);
            free_req(q);
            nccl_lock("aborting after a timeout");
            nccl_fail_all(err ? err->msg : "timeout");
            nccl_unlock();
            return PP_ERR_TIMEOUT;
        }
        comm_poll_pause(waited);
    }
}

static pp_status nccl_type(pp_dtype dt, ncclDataType_t *out, pp_error *err)
{
    switch (dt) {
    case PP_DTYPE_F32: *out = ncclFloat32; return PP_OK;
    case PP_DTYPE_F64: *out = ncclFloat64; return PP_OK;
    case PP_DTYPE_F16: *out = ncclFloat16; return PP_OK;
    case PP_DTYPE_BF16: *out = ncclBfloat16; return PP_OK;
    case PP_DTYPE_I32: *out = ncclInt32; return PP_OK;
    case PP_DTYPE_I64: *out = ncclInt64; return PP_OK;
    default:
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "allreduce of %s is not supported by the NCCL backend (float16, bfloat16, float32, "
                            "float64, int32, int64)",
                            pp_dtype_name(dt));
    }
}

static pp_status nccl_iallreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req,
                                 pp_error *err)
{
    ncclDataType_t type = ncclFloat32;
    PP_CHECK(nccl_type(dtype, &type, err));
    return collective(c, COLL_ALLREDUCE, buf, buf, count, type, 0, "allreduce", count * pp_dtype_size(dtype),
                      (nccl_req **)req, err);
}

static pp_status nccl_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err)
{
    nccl_req *q = NULL;
    PP_CHECK(collective(c, COLL_BROADCAST, buf, buf, bytes, ncclUint8, root, "broadcast", bytes, &q, err));
    return host_wait(c, q, err);
}

static pp_status nccl_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err)
{
    nccl_req *q = NULL;
    PP_CHECK(collective(c, COLL_ALLGATHER, in, out, bytes, ncclUint8, 0, "allgather", bytes, &q, err));
    return host_wait(c, q, err);
}

static pp_status nccl_barrier(pp_comm *c, pp_error *err)
{
    nccl_req *q = NULL;
    float *one = ctx_of(c)->scratch;
    PP_CHECK(collective(c, COLL_ALLREDUCE, one, one, 1, ncclFloat32, 0, "barrier", sizeof(float), &q, err));
    return host_wait(c, q, err);
}

static void nccl_destroy(pp_comm *c)
{
    nccl_ctx *x = ctx_of(c);
    nccl_watch_remove(x);   /* and ncclCommDestroy, under the lock */
    cudaSetDevice(x->device);
    for (int i = 0; i < NCCL_MAX_IN_FLIGHT; i++)
        if (x->flight[i].done) cudaEventDestroy(x->flight[i].done);
    if (x->ready) cudaEventDestroy(x->ready);
    if (x->scratch) cudaFree(x->scratch);
    if (x->stream) cudaStreamDestroy(x->stream);
    free(x);
    free(c);
}

static void nccl_abort(pp_comm *c, int code)
{
    nccl_lock("aborting the job");
    nccl_fail_all("the job was aborted");
    nccl_unlock();
    pp_comm_abort(ctx_of(c)->boot, code);
}

static pp_status nccl_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err);

static const pp_comm_i nccl_comm_i = {
    /* .name       = */ nccl_name,
    /* .isend      = */ nccl_isend,
    /* .irecv      = */ nccl_irecv,
    /* .wait       = */ nccl_wait,
    /* .test       = */ nccl_test,
    /* .iallreduce = */ nccl_iallreduce,
    /* .broadcast  = */ nccl_broadcast,
    /* .allgather  = */ nccl_allgather,
    /* .barrier    = */ nccl_barrier,
    /* .split      = */ nccl_split,
    /* .abort      = */ nccl_abort,
    /* .destroy    = */ nccl_destroy,
    /* .check      = */ nccl_check,
};

/* Its own stream (highest priority, so transfers start while compute kernels queue), the
 * ordering and in-flight events, and the barrier's scratch element. */
static cudaError_t make_streams(nccl_ctx *x)
{
    int least = 0, greatest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&x->stream, cudaStreamNonBlocking, greatest);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&x->ready, cudaEventDisableTiming);
    for (int i = 0; i < NCCL_MAX_IN_FLIGHT && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&x->flight[i].done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc((void **)&x->scratch, sizeof(float));
    return e;
}

/* A pp_comm around a NCCL communicator; compute is the caller's stream. nc is destroyed
 * here on failure. */
static pp_status wrap(ncclComm_t nc, pp_comm *boot, int device, cudaStream_t compute, double timeout, pp_comm **out,
                      pp_error *err)
{
    int rank = 0, size = 0;
    nccl_ctx *x = pp_calloc(1, sizeof *x);
    pp_comm *c = x ? comm_new(&nccl_comm_i, 0, 0, timeout, x) : NULL;
    if (!c) {
        free(x);
        ncclCommDestroy(nc);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a NCCL communicator");
    }
    *x = (nccl_ctx){.comm = nc, .compute = compute, .device = device, .owner = c, .boot = boot};
    pp_status st = PP_OK;
    ncclResult_t r = ncclCommUserRank(nc, &rank);
    if (r == ncclSuccess) r = ncclCommCount(nc, &size);
    c->rank = rank, c->size = size;
    if (r != ncclSuccess) st = nccl_fail(c, r, "ncclCommUserRank/Count", err);
    cudaError_t e = st == PP_OK ? make_streams(x) : cudaSuccess;
    if (e != cudaSuccess) st = cuda_fail(c, e, "setting up the nccl stream, events and scratch buffer", err);
    if (st == PP_OK) st = nccl_watch_add(x, err);
    if (st != PP_OK) {
        nccl_destroy(c);
        return st;
    }
    *out = c;
    return PP_OK;
}

static pp_status nccl_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err)
{
    *out = NULL;
    PP_CHECK(refuse(c, "split", err));
    nccl_ctx *x = ctx_of(c);
    ncclComm_t sub = NULL;
    nccl_lock("ncclCommSplit");
    pp_status st = begin(c, "split", err);
    if (st == PP_OK) {
        ncclResult_t r = ncclCommSplit(x->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, NULL);
        if (r != ncclSuccess) st = nccl_fail(c, r, "ncclCommSplit", err);
    }
    if (st != PP_OK) nccl_fail_all(err ? err->msg : "ncclCommSplit failed");
    nccl_unlock();
    PP_CHECK(st);
    return sub ? wrap(sub, x->boot, x->device, x->compute, c->timeout, out, err) : PP_OK;
}

pp_status pp_comm_nccl_create(pp_comm *boot, int cuda_device, void *compute_stream, pp_comm **out, pp_error *err)
{
    if (!boot || !out) return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_comm_nccl_create: NULL communicator");
    *out = NULL;
    cudaError_t e = cudaSetDevice(cuda_device);
    if (e != cudaSuccess)
        return pp_error_set(err, PP_ERR_DEVICE, "rank %d: cudaSetDevice(%d) for NCCL failed: %s", boot->rank,
                            cuda_device, cudaGetErrorString(e));
    ncclUniqueId id = {{0}};
    ncclResult_t r = ncclSuccess;
    if (boot->rank == 0) r = ncclGetUniqueId(&id);
    /* the root's failure must reach the others, or they would wait in the broadcast */
    struct {
        int failed;
        ncclUniqueId id;
    } msg = {r != ncclSuccess, id};
    PP_CHECK(pp_comm_broadcast(boot, &msg, sizeof msg, 0, err));
    /* every rank holds the id before any enters ncclCommInitRank, which blocks without
     * progressing MPI: an MPI whose broadcast completes at the root before the others have
     * it (HCOLL's deferred progress) would otherwise leave them waiting (cuDecomp's PR 24) */
    PP_CHECK(pp_comm_barrier(boot, err));
    if (msg.failed)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: ncclGetUniqueId failed on rank 0%s%s", boot->rank,
                            boot->rank == 0 ? ": " : "", boot->rank == 0 ? ncclGetErrorString(r) : "");
    ncclComm_t nc = NULL;
    r = ncclCommInitRank(&nc, boot->size, msg.id, boot->rank);
    if (r != ncclSuccess)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: ncclCommInitRank over %d ranks on cuda device %d failed: %s",
                            boot->rank, boot->size, cuda_device, ncclGetErrorString(r));
    return wrap(nc, boot, cuda_device, (cudaStream_t)compute_stream, boot->timeout, out, err);
}
