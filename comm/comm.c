/* The public pp_comm_* calls: argument checks with messages that name the bad value,
 * then dispatch through the backend's vtable. Also the helpers every backend shares
 * (the polling pause). */
#include "comm_internal.h"

#include <stdlib.h>
#include <time.h>
#include <onnxpipe/core_util.h>

#define TAG_LIMIT (1 << 20)

void comm_poll_pause(double waited)
{
    if (waited < 1e-3) return;
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
}

pp_comm *comm_new(const pp_comm_i *i, int rank, int size, double timeout, void *ctx)
{
    pp_comm *c = pp_calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (pp_comm){.i = i, .rank = rank, .size = size, .timeout = timeout, .ctx = ctx};
    return c;
}

static pp_status check_comm(const pp_comm *c, const char *op, pp_error *err)
{
    if (!c) return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_comm_%s: communicator is NULL", op);
    return PP_OK;
}

static pp_status check_p2p(const pp_comm *c, const char *op, const void *buf, size_t bytes, int peer, int tag,
                           pp_request **req, pp_error *err)
{
    PP_CHECK(check_comm(c, op, err));
    if (peer < 0 || peer >= c->size)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: %s peer %d out of range (0..%d) of the %s communicator",
                            c->rank, op, peer, c->size - 1, c->i->name(c));
    if (tag < 0 || tag >= TAG_LIMIT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: %s with rank %d: tag %d out of range (0..%d)", c->rank,
                            op, peer, tag, TAG_LIMIT - 1);
    if (!buf && bytes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: %s with rank %d: NULL buffer for %zu bytes", c->rank,
                            op, peer, bytes);
    if (!req) return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: %s: request pointer is NULL", c->rank, op);
    return PP_OK;
}

int pp_comm_rank(const pp_comm *c)
{
    return c->rank;
}

int pp_comm_size(const pp_comm *c)
{
    return c->size;
}

void pp_comm_destroy(pp_comm *c)
{
    if (c) c->i->destroy(c);
}

pp_status pp_comm_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                        pp_error *err)
{
    PP_CHECK(check_p2p(c, "send", buf, bytes, peer, tag, req, err));
    return c->i->isend(c, buf, bytes, peer, tag, req, err);
}

pp_status pp_comm_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err)
{
    PP_CHECK(check_p2p(c, "recv", buf, bytes, peer, tag, req, err));
    return c->i->irecv(c, buf, bytes, peer, tag, req, err);
}

pp_status pp_comm_wait(pp_comm *c, pp_request *req, pp_error *err)
{
    if (!req) return PP_OK;
    PP_CHECK(check_comm(c, "wait", err));
    return c->i->wait(c, req, err);
}

pp_status pp_comm_test(pp_comm *c, pp_request *req, int *done, pp_error *err)
{
    PP_CHECK(check_comm(c, "test", err));
    if (!req) {
        *done = 1;
        return PP_OK;
    }
    return c->i->test(c, req, done, err);
}

pp_status pp_comm_iallreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req, pp_error *err)
{
    PP_CHECK(check_comm(c, "iallreduce", err));
    if (!buf && count)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: allreduce: NULL buffer for %zu elements", c->rank,
                            count);
    if (!req) return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: allreduce: request pointer is NULL", c->rank);
    return c->i->iallreduce(c, buf, count, dtype, req, err);
}

pp_status pp_comm_allreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_error *err)
{
    pp_request *req = NULL;
    PP_CHECK(pp_comm_iallreduce(c, buf, count, dtype, &req, err));
    return pp_comm_wait(c, req, err);
}

pp_status pp_comm_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err)
{
    PP_CHECK(check_comm(c, "broadcast", err));
    if (root < 0 || root >= c->size)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: broadcast root %d out of range (0..%d)", c->rank, root,
                            c->size - 1);
    if (!buf && bytes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: broadcast: NULL buffer for %zu bytes", c->rank, bytes);
    return c->i->broadcast(c, buf, bytes, root, err);
}

pp_status pp_comm_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err)
{
    PP_CHECK(check_comm(c, "allgather", err));
    if ((!in || !out) && bytes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: allgather: NULL buffer for %zu bytes per rank",
                            c->rank, bytes);
    return c->i->allgather(c, in, out, bytes, err);
}

pp_status pp_comm_barrier(pp_comm *c, pp_error *err)
{
    PP_CHECK(check_comm(c, "barrier", err));
    return c->i->barrier(c, err);
}

pp_status pp_comm_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err)
{
    PP_CHECK(check_comm(c, "split", err));
    if (!out) return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: split: out pointer is NULL", c->rank);
    *out = NULL;
    return c->i->split(c, color, key, out, err);
}

pp_status pp_comm_check(pp_comm *c, pp_error *err)
{
    PP_CHECK(check_comm(c, "check", err));
    return c->i->check ? c->i->check(c, err) : PP_OK;
}

void pp_comm_abort(pp_comm *c, int code)
{
    if (c) c->i->abort(c, code);
}
