/* The MPI backend of pp_comm (host buffers): non-blocking point-to-point and
 * collectives whose waits poll with a deadline, so a job whose peer died fails with
 * a message instead of hanging. MPI errors return (MPI_ERRORS_RETURN) and are
 * translated with MPI_Error_string. */
#include "comm_internal.h"
#include <onnxpipe/element.h>   /* the 16-bit conversions of the bfloat16 / float16 sums */
#include <onnxpipe/env.h>

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

typedef struct mpi_ctx {
    MPI_Comm comm;     /* our own duplicate: its tags do not meet the application's */
    int world_rank;    /* this rank in MPI_COMM_WORLD, for messages */
    int *world_ranks;  /* [size] the world rank of each rank of comm (messages, the status board) */
    uint32_t group_id; /* the same on every member (wrap), so the status board tells communicators apart */
    uint64_t coll_seq; /* collectives started on comm */
    size_t chunk;      /* bytes per MPI call (COMM_DEFAULT_CHUNK) */
} mpi_ctx;

typedef enum { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER, OP_BARRIER } op_kind;
static const char *const op_names[] = {"send", "recv", "allreduce", "broadcast", "allgather", "barrier"};

/* One pp_request: n MPI requests (one per chunk) of one operation. */
typedef struct mpi_req {
    op_kind op;
    int peer, tag;          /* p2p: communicator rank of the peer; broadcast: root */
    size_t bytes;           /* p2p, broadcast: whole message; allreduce: whole buffer */
    size_t chunk;           /* bytes of every chunk but the last */
    int done;               /* chunks completed: reqs[0..done) */
    uint64_t seq;           /* a collective: its number on the communicator (mpi_ctx.coll_seq) */
    int n;
    MPI_Request reqs[];     /* n */
} mpi_req;

static int mpi_started_here;   /* MPI_Init_thread was ours, so MPI_Finalize is too */

static const char *mpi_name(const pp_comm *c)
{
    (void)c;
    return "mpi";
}

static mpi_ctx *ctx_of(const pp_comm *c)
{
    return c->ctx;
}

/* World rank of communicator rank r (for messages users match with mpirun's). */
static int world_rank_of(const pp_comm *c, int r)
{
    return r >= 0 && r < c->size ? ctx_of(c)->world_ranks[r] : r;
}

static pp_status mpi_fail(const pp_comm *c, int rc, pp_error *err, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
    return pp_error_set(err, PP_ERR_COMM, "rank %d: %s failed: %s", ctx_of(c)->world_rank, what, text);
}

static const char *describe(const pp_comm *c, const mpi_req *q, char *buf, size_t len)
{
    if (q->op == OP_SEND || q->op == OP_RECV)
        snprintf(buf, len, "%s of %zu bytes with rank %d (tag %d)", op_names[q->op], q->bytes,
                 world_rank_of(c, q->peer), q->tag);
    else if (q->op == OP_BROADCAST)
        snprintf(buf, len, "broadcast of %zu bytes from rank %d over %d ranks", q->bytes, world_rank_of(c, q->peer),
                 c->size);
    else
        snprintf(buf, len, "%s of %zu bytes over %d ranks", op_names[q->op], q->bytes, c->size);
    return buf;
}

static pp_status new_req(op_kind op, int peer, int tag, size_t bytes, size_t chunk, mpi_req **out, pp_error *err)
{
    size_t n = bytes ? (bytes + chunk - 1) / chunk : 1;
    if (n > INT_MAX) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s of %zu bytes: too large", op_names[op], bytes);
    mpi_req *q = pp_calloc(1, sizeof *q + n * sizeof(MPI_Request));
    if (!q) return pp_error_set(err, PP_ERR_NOMEM, "%s of %zu bytes: out of memory for the request", op_names[op], bytes);
    *q = (mpi_req){.op = op, .peer = peer, .tag = tag, .bytes = bytes, .chunk = chunk, .n = (int)n};
    for (size_t k = 0; k < n; k++) q->reqs[k] = MPI_REQUEST_NULL;
    *out = q;
    return PP_OK;
}

/* Bytes of chunk k. */
static int chunk_bytes(const mpi_req *q, int k)
{
    size_t off = (size_t)k * q->chunk;
    return (int)(q->bytes - off < q->chunk ? q->bytes - off : q->chunk);
}

/* Frees q after a failure or a timeout: point-to-point requests are cancelled; MPI
 * forbids freeing a pending collective, so those are left to MPI (the communicator
 * is not usable for collectives afterwards). */
static void give_up(mpi_req *q)
{
    for (int k = 0; k < q->n; k++) {
        if (q->reqs[k] == MPI_REQUEST_NULL) continue;
        if (q->op == OP_SEND || q->op == OP_RECV) {
            MPI_Cancel(&q->reqs[k]);
            MPI_Request_free(&q->reqs[k]);
        }
    }
    free(q);
}

/* Start: posts (or fails on) every chunk, and hands the request out or frees it. */
static pp_status started(pp_comm *c, mpi_req *q, int rc, pp_request **req, pp_error *err)
{
    if (rc != MPI_SUCCESS) {
        char what[160];
        pp_status st = mpi_fail(c, rc, err, describe(c, q, what, sizeof what));
        give_up(q);
        return st;
    }
    if (q->op != OP_SEND && q->op != OP_RECV) q->seq = ++ctx_of(c)->coll_seq;
    *req = (pp_request *)q;
    return PP_OK;
}

static pp_status mpi_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                           pp_error *err)
{
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_SEND, peer, tag, bytes, ctx_of(c)->chunk, &q, err));
    int rc = MPI_SUCCESS;
    for (int k = 0; k < q->n && rc == MPI_SUCCESS; k++)
        rc = MPI_Isend((const char *)buf + (size_t)k * q->chunk, chunk_bytes(q, k), MPI_BYTE, peer, tag,
                       ctx_of(c)->comm, &q->reqs[k]);
    return started(c, q, rc, req, err);
}

static pp_status mpi_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err)
{
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_RECV, peer, tag, bytes, ctx_of(c)->chunk, &q, err));
    int rc = MPI_SUCCESS;
    for (int k = 0; k < q->n && rc == MPI_SUCCESS; k++)
        rc = MPI_Irecv((char *)buf + (size_t)k * q->chunk, chunk_bytes(q, k), MPI_BYTE, peer, tag, ctx_of(c)->comm,
                       &q->reqs[k]);
    return started(c, q, rc, req, err);
}

static pp_status mpi_type(pp_dtype dt, MPI_Datatype *out, pp_error *err)
{
    switch (dt) {
    case PP_DTYPE_F32: *out = MPI_FLOAT; return PP_OK;
    case PP_DTYPE_F64: *out = MPI_DOUBLE; return PP_OK;
    case PP_DTYPE_I32: *out = MPI_INT32_T; return PP_OK;
    case PP_DTYPE_I64: *out = MPI_INT64_T; return PP_OK;
    case PP_DTYPE_BF16:
    case PP_DTYPE_F16: *out = MPI_UINT16_T; return PP_OK;   /* summed by sum_16bit */
    default:
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "allreduce of %s is not supported by the MPI backend (float32, "
                            "float64, int32, int64, bfloat16, float16)", pp_dtype_name(dt));
    }
}

/* bfloat16 and float16 sums, which MPI lacks: each pair widened to float32, added and
 * rounded back to nearest even, as NCCL's ncclBfloat16 / ncclFloat16 sums do. */
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pp_el_bf16_from_f32(pp_el_f32_from_bf16(a[i]) + pp_el_f32_from_bf16(b[i]));
}
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pp_el_f16_from_f32(pp_el_f32_from_f16(a[i]) + pp_el_f32_from_f16(b[i]));
}

/* The sum of dt: MPI_SUM, or the 16-bit ones, made once (MPI frees them at its finalize). */
static pp_status mpi_sum(pp_comm *c, pp_dtype dt, MPI_Op *op, pp_error *err)
{
    static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    *op = MPI_SUM;
    if (dt != PP_DTYPE_BF16 && dt != PP_DTYPE_F16) return PP_OK;
    const int k = dt == PP_DTYPE_F16;
    if (ops[k] == MPI_OP_NULL) {
        int rc = MPI_Op_create(k ? sum_f16 : sum_bf16, 1, &ops[k]);
        if (rc != MPI_SUCCESS) return mpi_fail(c, rc, err, "MPI_Op_create (a 16-bit sum)");
    }
    *op = ops[k];
    return PP_OK;
}

static pp_status mpi_iallreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req,
                                pp_error *err)
{
    MPI_Datatype type = MPI_DATATYPE_NULL;
    PP_CHECK(mpi_type(dtype, &type, err));
    MPI_Op sum;
    PP_CHECK(mpi_sum(c, dtype, &sum, err));
    size_t esize = pp_dtype_size(dtype);
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_ALLREDUCE, -1, -1, count * esize, ctx_of(c)->chunk / esize * esize, &q, err));
    int rc = MPI_SUCCESS;
    for (int k = 0; k < q->n && rc == MPI_SUCCESS; k++)
        rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)k * q->chunk, chunk_bytes(q, k) / (int)esize, type,
                            sum, ctx_of(c)->comm, &q->reqs[k]);
    return started(c, q, rc, req, err);
}

/* Polls q once; sets *done when every chunk has completed. Chunks complete in order,
 * so each poll tests from the first pending one (MPI_Test drives MPI's progress for
 * all). A receive that got fewer bytes than asked is an error, as is one that got more
 * (MPI_ERR_TRUNCATE; Open MPI truncates a message to oneself silently). */
static pp_status poll_req(pp_comm *c, mpi_req *q, int *done, pp_error *err)
{
    char what[160];
    while (q->done < q->n) {
        MPI_Status stat;
        int flag = 0;
        int rc = MPI_Test(&q->reqs[q->done], &flag, &stat);
        if (rc != MPI_SUCCESS) return mpi_fail(c, rc, err, describe(c, q, what, sizeof what));
        if (!flag) break;
        if (q->op == OP_RECV) {
            int got = 0;
            MPI_Get_count(&stat, MPI_BYTE, &got);
            if (got != chunk_bytes(q, q->done))
                return pp_error_set(err, PP_ERR_COMM, "rank %d: %s: got %d bytes in chunk %d, expected %d",
                                    ctx_of(c)->world_rank, describe(c, q, what, sizeof what), got, q->done,
                                    chunk_bytes(q, q->done));
        }
        q->done++;
    }
    *done = q->done == q->n;
    return PP_OK;
}

static pp_status mpi_test(pp_comm *c, pp_request *req, int *done, pp_error *err)
{
    return poll_req(c, (mpi_req *)req, done, err);
}

/* Tells the status board what q waits for, in world ranks. */
static void board_wait_begin(const pp_comm *c, const mpi_req *q)
{
    if (q->op == OP_SEND || q->op == OP_RECV) {
        comm_board_wait_begin(op_names[q->op], world_rank_of(c, q->peer), NULL, q->bytes, q->tag);
        return;
    }
    const comm_group g = {.id = ctx_of(c)->group_id, .seq = q->seq, .world_ranks = ctx_of(c)->world_ranks, .n = c->size};
    comm_board_wait_begin(op_names[q->op], -1, &g, q->bytes, -1);
}

static pp_status mpi_wait(pp_comm *c, pp_request *req, pp_error *err)
{
    mpi_req *q = (mpi_req *)req;
    double t0 = pp_now();
    for (int polls = 0;; polls++) {
        int done = 0;
        pp_status st = poll_req(c, q, &done, err);
        if (st != PP_OK || done) {
            if (st == PP_OK) free(q);
            else give_up(q);
            if (polls) comm_board_wait_end();
            return st;
        }
        if (!polls) board_wait_begin(c, q);
        double waited = pp_now() - t0;
        if (waited > c->timeout) {
            char what[160];
            describe(c, q, what, sizeof what);
            if (q->op == OP_SEND || q->op == OP_RECV) {
                int p = world_rank_of(c, q->peer);
                st = pp_error_set(err, PP_ERR_TIMEOUT,
                                  "rank %d: waited %.1f s for %s; is rank %d alive? (PP_COMM_TIMEOUT=%g s)",
                                  ctx_of(c)->world_rank, waited, what, p, c->timeout);
            } else {
                st = pp_error_set(err, PP_ERR_TIMEOUT,
                                  "rank %d: waited %.1f s for %s; is every rank alive and calling it? "
                                  "(PP_COMM_TIMEOUT=%g s)",
                                  ctx_of(c)->world_rank, waited, what, c->timeout);
            }
            st = comm_board_explain(err);
            comm_board_wait_end();
            give_up(q);
            return st;
        }
        comm_poll_pause(waited);
    }
}

/* The blocking collectives are their non-blocking twins plus our wait, so they
 * time out like everything else. */
static pp_status mpi_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err)
{
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_BROADCAST, root, -1, bytes, ctx_of(c)->chunk, &q, err));
    int rc = MPI_SUCCESS;
    for (int k = 0; k < q->n && rc == MPI_SUCCESS; k++)
        rc = MPI_Ibcast((char *)buf + (size_t)k * q->chunk, chunk_bytes(q, k), MPI_BYTE, root, ctx_of(c)->comm,
                        &q->reqs[k]);
    pp_request *r = NULL;
    PP_CHECK(started(c, q, rc, &r, err));
    return mpi_wait(c, r, err);
}

static pp_status mpi_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err)
{
    if (bytes > INT_MAX)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: allgather of %zu bytes per rank exceeds MPI's %d",
                            ctx_of(c)->world_rank, bytes, INT_MAX);
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_ALLGATHER, -1, -1, bytes, bytes ? bytes : 1, &q, err));
    int rc = MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, ctx_of(c)->comm, &q->reqs[0]);
    pp_request *r = NULL;
    PP_CHECK(started(c, q, rc, &r, err));
    return mpi_wait(c, r, err);
}

static pp_status mpi_barrier(pp_comm *c, pp_error *err)
{
    mpi_req *q = NULL;
    PP_CHECK(new_req(OP_BARRIER, -1, -1, 0, 1, &q, err));
    int rc = MPI_Ibarrier(ctx_of(c)->comm, &q->reqs[0]);
    pp_request *r = NULL;
    PP_CHECK(started(c, q, rc, &r, err));
    return mpi_wait(c, r, err);
}

static const pp_comm_i mpi_comm_i;
static void mpi_destroy(pp_comm *c);

/* out[0..size): the world rank of each rank of comm; out[size..2 size) is scratch. */
static int translate_to_world(MPI_Comm comm, int size, int *out)
{
    MPI_Group g, w;
    int rc = MPI_Comm_group(comm, &g);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Comm_group(MPI_COMM_WORLD, &w);
    if (rc == MPI_SUCCESS) {
        for (int i = 0; i < size; i++) out[size + i] = i;
        rc = MPI_Group_translate_ranks(g, size, out + size, w, out);
        MPI_Group_free(&w);
    }
    MPI_Group_free(&g);
    return rc;
}

/* Wraps an MPI communicator we own (freed by destroy, also on failure here). */
static pp_status wrap(MPI_Comm comm, double timeout, size_t chunk, pp_comm **out, pp_error *err)
{
    int rank = 0, size = 0, wrank = 0;
    int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &size);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    int *ranks = rc == MPI_SUCCESS ? pp_malloc((size_t)size * 2 * sizeof *ranks) : NULL;
    if (ranks) rc = translate_to_world(comm, size, ranks);
    mpi_ctx *ctx = rc == MPI_SUCCESS && ranks ? pp_malloc(sizeof *ctx) : NULL;
    pp_comm *c = ctx ? comm_new(&mpi_comm_i, rank, size, timeout, ctx) : NULL;
    if (!c) {
        free(ctx);
        free(ranks);
        MPI_Comm_free(&comm);
        if (rc != MPI_SUCCESS) return pp_error_set(err, PP_ERR_COMM, "setting up an MPI communicator failed (%d)", rc);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a communicator");
    }
    *ctx = (mpi_ctx){.comm = comm, .world_rank = wrank, .world_ranks = ranks, .chunk = chunk};
    /* the id: a count of the communicators its rank 0 made, and its members */
    static uint32_t made;
    uint32_t id = ++made;
    pp_status st = size > 1 ? mpi_broadcast(c, &id, sizeof id, 0, err) : PP_OK;
    if (st != PP_OK) {
        mpi_destroy(c);
        return st;
    }
    ctx->group_id = pp_crc32c(id, ranks, (size_t)size * sizeof *ranks);
    *out = c;
    return PP_OK;
}

static pp_status mpi_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err)
{
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(ctx_of(c)->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, err, "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return PP_OK;
    return wrap(sub, c->timeout, ctx_of(c)->chunk, out, err);
}

static void mpi_abort(pp_comm *c, int code)
{
    (void)c;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_destroy(pp_comm *c)
{
    MPI_Comm_free(&ctx_of(c)->comm);
    free(ctx_of(c)->world_ranks);
    free(c->ctx);
    free(c);
}

static const pp_comm_i mpi_comm_i = {
    /* .name       = */ mpi_name,
    /* .isend      = */ mpi_isend,
    /* .irecv      = */ mpi_irecv,
    /* .wait       = */ mpi_wait,
    /* .test       = */ mpi_test,
    /* .iallreduce = */ mpi_iallreduce,
    /* .broadcast  = */ mpi_broadcast,
    /* .allgather  = */ mpi_allgather,
    /* .barrier    = */ mpi_barrier,
    /* .split      = */ mpi_split,
    /* .abort      = */ mpi_abort,
    /* .destroy    = */ mpi_destroy,
    /* .check      = */ NULL,
};

pp_status pp_comm_mpi_world(pp_comm **out, pp_error *err)
{
    double timeout;
    PP_CHECK(pp_env_seconds("PP_COMM_TIMEOUT", &timeout, err));   /* default 120 */
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return pp_error_set(err, PP_ERR_COMM, "MPI is already finalized; create the world communicator before "
                                              "pp_comm_mpi_finalize");
    if (!inited) {
        /* Open MPI's default non-blocking all-reduce schedule runs at a third of the
         * blocking one's bandwidth for MiB-sized gradient buckets (bench_comm); its
         * ring matches or beats it. A user's own setting wins. */
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return pp_error_set(err, PP_ERR_COMM, "MPI_Init_thread failed; is the job launched with mpirun?");
        mpi_started_here = 1;
        /* our job: errors on the world return to us too (MPI_Abort still ends it) */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Comm dup;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rc != MPI_SUCCESS) return pp_error_set(err, PP_ERR_COMM, "MPI_Comm_dup(MPI_COMM_WORLD) failed (%d)", rc);
    return wrap(dup, timeout, COMM_DEFAULT_CHUNK, out, err);
}

void pp_comm_mpi_world_rank(int *rank, int *size)
{
    int inited = 0, finalized = 0;
    *rank = 0;
    *size = 1;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized) return;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

void pp_comm_mpi_abort_world(int code)
{
    int rank, size;
    pp_comm_mpi_world_rank(&rank, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

void pp_comm_mpi_finalize(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (mpi_started_here && !finalized) MPI_Finalize();
}

pp_status pp_comm_mpi_node(pp_comm *world, pp_comm **out, pp_error *err)
{
    if (!world || !out || world->i != &mpi_comm_i)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_comm_mpi_node needs an MPI communicator");
    *out = NULL;
    MPI_Comm node = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(ctx_of(world)->comm, MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_fail(world, rc, err, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    return wrap(node, world->timeout, ctx_of(world)->chunk, out, err);
}

const char *pp_comm_mpi_host(void)
{
    static char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited || MPI_Get_processor_name(name, &len) != MPI_SUCCESS) gethostname(name, sizeof name - 1);
    return name;
}

void comm_mpi_set_chunk(pp_comm *c, size_t bytes)
{
    ctx_of(c)->chunk = bytes;
}
