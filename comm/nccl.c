/* The NCCL backend of pp_comm (device buffers; CUDA builds only): every operation is
 * enqueued on the communicator's stream and followed by a CUDA event that its request
 * waits on, polling ncclCommGetAsyncError too, with the communicator's deadline.
 * Sends and receives are held until the next wait, test or collective and then go out
 * together in one ncclGroupStart/End, so "post both, then wait" exchanges between two
 * ranks cannot deadlock on the single stream. */
#include "comm_internal.h"

#include <onnxpipe/comm_nccl.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>

typedef struct nccl_ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    int own_stream;        /* created here, destroyed with the communicator */
    int device;
    float *scratch;        /* device, 1 element: the barrier's all-reduce */
    pp_comm *boot;         /* borrowed: ends the job in abort */
    int aborted;           /* after an error or a timeout; every call then fails */
    struct nccl_req *pending, **pending_end;   /* p2p posted but not yet enqueued, in order */
} nccl_ctx;

typedef struct nccl_req {
    cudaEvent_t done;
    const char *op;
    int peer, tag;         /* p2p: communicator rank of the peer; collectives: -1 */
    size_t bytes;
    void *buf;             /* p2p: device memory */
    int enqueued;          /* 1: on the stream, done is recorded; -1: dropped by a failed flush */
    struct nccl_req *next; /* in the pending list */
} nccl_req;

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

#define CUDA_TRY(c, call, what, err)                                    \
    do {                                                                \
        cudaError_t cuda_try_e_ = (call);                               \
        if (cuda_try_e_ != cudaSuccess) return cuda_fail(c, cuda_try_e_, what, err); \
    } while (0)
#define NCCL_TRY(c, call, what, err)                                    \
    do {                                                                \
        ncclResult_t nccl_try_r_ = (call);                              \
        if (nccl_try_r_ != ncclSuccess) return nccl_fail(c, nccl_try_r_, what, err); \
    } while (0)

static void abort_nccl(pp_comm *c)
{
    if (ctx_of(c)->aborted) return;
    ctx_of(c)->aborted = 1;
    ncclCommAbort(ctx_of(c)->comm);
}

/* Every enqueueing call starts here: the right device, and a live communicator. */
static pp_status begin(pp_comm *c, const char *op, pp_error *err)
{
    if (ctx_of(c)->aborted)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: nccl %s: the communicator was aborted after an earlier "
                                              "error or timeout",
                            c->rank, op);
    CUDA_TRY(c, cudaSetDevice(ctx_of(c)->device), "cudaSetDevice", err);
    return PP_OK;
}

/* A request with an event (not yet recorded). */
static pp_status new_req(pp_comm *c, const char *op, int peer, int tag, size_t bytes, void *buf, nccl_req **out,
                         pp_error *err)
{
    nccl_req *q = pp_calloc(1, sizeof *q);
    if (!q) return pp_error_set(err, PP_ERR_NOMEM, "rank %d: nccl %s: out of memory for the request", c->rank, op);
    *q = (nccl_req){.op = op, .peer = peer, .tag = tag, .bytes = bytes, .buf = buf};
    cudaError_t e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(q);
        return cuda_fail(c, e, "cudaEventCreate", err);
    }
    *out = q;
    return PP_OK;
}

static void free_req(nccl_req *q)
{
    cudaEventDestroy(q->done);
    free(q);
}

/* Enqueues the held sends and receives as one group, then records their events. */
static pp_status flush(pp_comm *c, pp_error *err)
{
    nccl_ctx *x = ctx_of(c);
    if (!x->pending) return PP_OK;
    nccl_req *list = x->pending;
    x->pending = NULL;
    x->pending_end = &x->pending;
    pp_status st = begin(c, list->op, err);
    ncclResult_t r = st == PP_OK ? ncclGroupStart() : ncclSuccess;
    for (nccl_req *q = list; q && st == PP_OK && r == ncclSuccess; q = q->next)
        r = q->op[0] == 's' ? ncclSend(q->buf, q->bytes, ncclUint8, q->peer, x->comm, x->stream)
                            : ncclRecv(q->buf, q->bytes, ncclUint8, q->peer, x->comm, x->stream);
    if (st == PP_OK) {
        ncclResult_t r2 = ncclGroupEnd();
        if (r == ncclSuccess) r = r2;
        if (r != ncclSuccess) st = nccl_fail(c, r, "ncclSend/ncclRecv group", err);
    }
    cudaError_t e = cudaSuccess;
    for (nccl_req *q = list; q; q = q->next) {
        if (st == PP_OK && e == cudaSuccess) e = cudaEventRecord(q->done, x->stream);
        q->enqueued = st == PP_OK && e == cudaSuccess ? 1 : -1;
    }
    if (st == PP_OK && e != cudaSuccess) st = cuda_fail(c, e, "recording a completion event", err);
    if (st != PP_OK) abort_nccl(c);
    return st;
}

/* Every collective starts here: device and liveness, then the held p2p, in order. */
static pp_status start(pp_comm *c, const char *op, pp_error *err)
{
    PP_CHECK(begin(c, op, err));
    return flush(c, err);
}

static pp_status post(pp_comm *c, const char *op, void *buf, size_t bytes, int peer, int tag, pp_request **req,
                      pp_error *err)
{
    PP_CHECK(begin(c, op, err));
    nccl_req *q = NULL;
    PP_CHECK(new_req(c, op, peer, tag, bytes, buf, &q, err));
    *ctx_of(c)->pending_end = q;
    ctx_of(c)->pending_end = &q->next;
    *req = (pp_request *)q;
    return PP_OK;
}

static pp_status nccl_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                            pp_error *err)
{
    return post(c, "send", (void *)buf, bytes, peer, tag, req, err);
}

static pp_status nccl_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err)
{
    return post(c, "recv", buf, bytes, peer, tag, req, err);
}

/* After a collective was enqueued on the stream: a request holding its event. */
static pp_status finish(pp_comm *c, const char *op, size_t bytes, pp_request **req, pp_error *err)
{
    nccl_req *q = NULL;
    PP_CHECK(new_req(c, op, -1, -1, bytes, NULL, &q, err));
    cudaError_t e = cudaEventRecord(q->done, ctx_of(c)->stream);
    if (e != cudaSuccess) {
        free_req(q);
        return cuda_fail(c, e, "recording the completion event", err);
    }
    q->enqueued = 1;
    *req = (pp_request *)q;
    return PP_OK;
}

static pp_status poll_req(pp_comm *c, nccl_req *q, int *done, pp_error *err)
{
    *done = 0;
    if (!q->enqueued) PP_CHECK(flush(c, err));
    /* an aborted ncclComm_t is freed: touch it no more */
    if (q->enqueued < 0 || ctx_of(c)->aborted)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: nccl %s: the communicator was aborted after an earlier "
                                              "error or timeout",
                            c->rank, q->op);
    cudaError_t e = cudaEventQuery(q->done);
    *done = e == cudaSuccess;
    if (e != cudaSuccess && e != cudaErrorNotReady) {
        abort_nccl(c);
        return cuda_fail(c, e, q->op, err);
    }
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(ctx_of(c)->comm, &async);
    if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress) r = async;
    if (r != ncclSuccess) {
        abort_nccl(c);
        return nccl_fail(c, r, q->op, err);
    }
    return PP_OK;
}

static pp_status nccl_test(pp_comm *c, pp_request *req, int *done, pp_error *err)
{
    return poll_req(c, (nccl_req *)req, done, err);
}

static pp_status nccl_wait(pp_comm *c, pp_request *req, pp_error *err)
{
    nccl_req *q = (nccl_req *)req;
    double t0 = pp_now();
    pp_status st = PP_OK;
    for (;;) {
        int done = 0;
        st = poll_req(c, q, &done, err);
        if (st != PP_OK || done) break;
        double waited = pp_now() - t0;
        if (waited > c->timeout) {
            abort_nccl(c);
            if (q->peer >= 0)
                st = pp_error_set(err, PP_ERR_TIMEOUT,
                                  "rank %d: waited %.1f s for nccl %s of %zu bytes with rank %d (tag %d); is rank %d "
                                  "alive? (PP_COMM_TIMEOUT=%g s; the NCCL communicator was aborted)",
                                  c->rank, waited, q->op, q->bytes, q->peer, q->tag, q->peer, c->timeout);
            else
                st = pp_error_set(err, PP_ERR_TIMEOUT,
                                  "rank %d: waited %.1f s for nccl %s of %zu bytes over %d ranks; is every rank alive "
                                  "and calling it? (PP_COMM_TIMEOUT=%g s; the NCCL communicator was aborted)",
                                  c->rank, waited, q->op, q->bytes, c->size, c->timeout);
            break;
        }
        comm_poll_pause(waited);
    }
    free_req(q);
    return st;
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
    PP_CHECK(start(c, "allreduce", err));
    NCCL_TRY(c, ncclAllReduce(buf, buf, count, type, ncclSum, ctx_of(c)->comm, ctx_of(c)->stream), "ncclAllReduce",
             err);
    return finish(c, "allreduce", count * pp_dtype_size(dtype), req, err);
}

static pp_status wait_new(pp_comm *c, const char *op, size_t bytes, pp_error *err)
{
    pp_request *req = NULL;
    PP_CHECK(finish(c, op, bytes, &req, err));
    return nccl_wait(c, req, err);
}

static pp_status nccl_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err)
{
    PP_CHECK(start(c, "broadcast", err));
    NCCL_TRY(c, ncclBroadcast(buf, buf, bytes, ncclUint8, root, ctx_of(c)->comm, ctx_of(c)->stream), "ncclBroadcast",
             err);
    return wait_new(c, "broadcast", bytes, err);
}

static pp_status nccl_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err)
{
    PP_CHECK(start(c, "allgather", err));
    NCCL_TRY(c, ncclAllGather(in, out, bytes, ncclUint8, ctx_of(c)->comm, ctx_of(c)->stream), "ncclAllGather", err);
    return wait_new(c, "allgather", bytes, err);
}

static pp_status nccl_barrier(pp_comm *c, pp_error *err)
{
    PP_CHECK(start(c, "barrier", err));
    NCCL_TRY(c, ncclAllReduce(ctx_of(c)->scratch, ctx_of(c)->scratch, 1, ncclFloat32, ncclSum, ctx_of(c)->comm,
                              ctx_of(c)->stream),
             "ncclAllReduce (barrier)", err);
    return wait_new(c, "barrier", sizeof(float), err);
}

static void nccl_destroy(pp_comm *c)
{
    nccl_ctx *x = ctx_of(c);
    cudaSetDevice(x->device);
    if (x->comm && !x->aborted) ncclCommDestroy(x->comm);
    if (x->scratch) cudaFree(x->scratch);
    if (x->own_stream && x->stream) cudaStreamDestroy(x->stream);
    free(x);
    free(c);
}

static void nccl_abort(pp_comm *c, int code)
{
    abort_nccl(c);
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
};

/* A pp_comm around a NCCL communicator on (device, stream): stream NULL makes one.
 * nc is destroyed here on failure. */
static pp_status wrap(ncclComm_t nc, pp_comm *boot, int device, cudaStream_t stream, double timeout, pp_comm **out,
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
    *x = (nccl_ctx){.comm = nc, .stream = stream, .device = device, .boot = boot};
    x->pending_end = &x->pending;
    pp_status st = PP_OK;
    ncclResult_t r = ncclCommUserRank(nc, &rank);
    if (r == ncclSuccess) r = ncclCommCount(nc, &size);
    c->rank = rank, c->size = size;
    if (r != ncclSuccess) st = nccl_fail(c, r, "ncclCommUserRank/Count", err);
    cudaError_t e = cudaSuccess;
    if (st == PP_OK && !stream) {
        e = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking);
        x->own_stream = e == cudaSuccess;
    }
    if (st == PP_OK && e == cudaSuccess) e = cudaMalloc((void **)&x->scratch, sizeof(float));
    if (st == PP_OK && e != cudaSuccess) st = cuda_fail(c, e, "setting up the stream and scratch buffer", err);
    if (st != PP_OK) {
        nccl_destroy(c);
        return st;
    }
    *out = c;
    return PP_OK;
}

static pp_status nccl_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err)
{
    PP_CHECK(start(c, "split", err));
    ncclComm_t sub = NULL;
    NCCL_TRY(c, ncclCommSplit(ctx_of(c)->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, NULL),
             "ncclCommSplit", err);
    if (!sub) return PP_OK;
    /* the part shares its parent's stream (when the parent owns it, it must outlive the part) */
    return wrap(sub, ctx_of(c)->boot, ctx_of(c)->device, ctx_of(c)->stream, c->timeout, out, err);
}

pp_status pp_comm_nccl_create(pp_comm *boot, int cuda_device, void *cuda_stream, pp_comm **out, pp_error *err)
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
    if (msg.failed)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: ncclGetUniqueId failed on rank 0%s%s", boot->rank,
                            boot->rank == 0 ? ": " : "", boot->rank == 0 ? ncclGetErrorString(r) : "");
    ncclComm_t nc = NULL;
    r = ncclCommInitRank(&nc, boot->size, msg.id, boot->rank);
    if (r != ncclSuccess)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: ncclCommInitRank over %d ranks on cuda device %d failed: %s",
                            boot->rank, boot->size, cuda_device, ncclGetErrorString(r));
    return wrap(nc, boot, cuda_device, (cudaStream_t)cuda_stream, boot->timeout, out, err);
}
