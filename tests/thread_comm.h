/* An in-process communicator for tests: the ranks of a job are threads of one process,
 * and a pp_comm (include/onnxpipe/backend/comm_backend.h's vtable) moves the real bytes between them
 * through one mailbox. Point-to-point follows MPI's matching: a message goes to the first
 * receive posted for its (communicator, source, tag), else waits, in send order, for
 * one; sends are eager (the bytes are copied when the send is posted, so a send request
 * is done at once). Collectives (float32/float64/int32/int64 sums, broadcast, allgather,
 * barrier, split) go through the same mailbox on a channel of their own, numbered by each
 * rank's count of collectives on that communicator; an all-reduce adds the ranks'
 * contributions in rank order, so every rank gets the same bits. A wait gives up after
 * c->timeout seconds with an error naming both ranks. Not a mock: nothing is computed
 * for the caller that MPI would not compute.
 *
 *   thread_job *job = thread_job_create(4);
 *   ... in thread r: pp_comm *world = thread_job_world(job, r); ...; pp_comm_destroy(world);
 *   thread_job_destroy(job);   after every thread has destroyed its communicators */
#ifndef PP_TEST_THREAD_COMM_H
#define PP_TEST_THREAD_COMM_H

#include "comm_internal.h"   /* comm_new */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct thread_msg {
    struct thread_msg *next;
    int group, src, dst, coll;
    long tag;               /* p2p: the caller's tag; collectives: the sender's collective count */
    size_t bytes;
    unsigned char data[];
} thread_msg;

typedef struct thread_group {
    struct thread_group *next;
    int id, size, refs;
    int parent, color;      /* split of `parent` (its split_seq-th), color: the key that finds it */
    long split_seq;
} thread_group;

typedef struct thread_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    thread_msg *unexpected;         /* sent, not yet received; in send order */
    struct pp_request *posted;      /* receives waiting for a message; in post order */
    thread_group *groups;
    int next_group;
} thread_job;

typedef struct thread_ctx {
    thread_job *job;
    thread_group *grp;
    long coll_seq, split_seq;
} thread_ctx;

/* A point-to-point request, or an all-reduce that collects the others' contributions at
 * its wait (its own was sent when posted). */
struct pp_request {
    struct pp_request *next;
    int group, src, dst, done;
    long tag;
    void *buf;
    size_t bytes;
    pp_status st;
    char msg[160];
    int reduce;             /* 1: an all-reduce */
    pp_dtype dtype;
    size_t count;
    long seq;
    void *own;              /* this rank's contribution, as it was when posted */
};

static const pp_comm_i thread_comm_i;

static thread_ctx *thread_ctx_of(const pp_comm *c) { return (thread_ctx *)c->ctx; }

static pp_comm *thread_comm_make(thread_job *job, thread_group *grp, int rank)
{
    thread_ctx *x = calloc(1, sizeof *x);
    x->job = job;
    x->grp = grp;
    return comm_new(&thread_comm_i, rank, grp->size, 60.0, x);
}

static thread_job *thread_job_create(int size)
{
    thread_job *job = calloc(1, sizeof *job);
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cv, NULL);
    thread_group *w = calloc(1, sizeof *w);
    *w = (thread_group){.id = job->next_group++, .size = size, .refs = size, .parent = -1};
    job->groups = w;
    return job;
}

/* Rank `rank`'s world communicator (each rank takes its own once). */
static pp_comm *thread_job_world(thread_job *job, int rank)
{
    thread_group *w = job->groups;
    while (w->parent != -1) w = w->next;
    return thread_comm_make(job, w, rank);
}

static void thread_job_destroy(thread_job *job)
{
    while (job->unexpected) {
        thread_msg *m = job->unexpected;
        job->unexpected = m->next;
        free(m);
    }
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    free(job);
}

static const char *thread_name(const pp_comm *c)
{
    (void)c;
    return "thread";
}

/* Under the lock: message m completes receive r (and is freed). */
static void thread_fill(struct pp_request *r, thread_msg *m)
{
    if (m->bytes != r->bytes) {
        r->st = PP_ERR_COMM;
        snprintf(r->msg, sizeof r->msg, "rank %d: receive of %zu bytes from rank %d (tag %ld) got %zu", r->dst,
                 r->bytes, r->src, r->tag, m->bytes);
    } else if (m->bytes) {
        memcpy(r->buf, m->data, m->bytes);
    }
    r->done = 1;
    free(m);
}

/* Under the lock: hands the message to the first receive posted for it, else queues it. */
static void thread_deliver(thread_job *job, thread_msg *m)
{
    for (struct pp_request **p = &job->posted; *p && !m->coll; p = &(*p)->next) {
        struct pp_request *r = *p;
        if (r->group != m->group || r->src != m->src || r->dst != m->dst || r->tag != m->tag) continue;
        *p = r->next;
        thread_fill(r, m);
        pthread_cond_broadcast(&job->cv);
        return;
    }
    thread_msg **t = &job->unexpected;
    while (*t) t = &(*t)->next;
    m->next = NULL;
    *t = m;
    pthread_cond_broadcast(&job->cv);
}

static void thread_post(pp_comm *c, const void *buf, size_t bytes, int dst, long tag, int coll)
{
    thread_ctx *x = thread_ctx_of(c);
    thread_msg *m = malloc(sizeof *m + (bytes ? bytes : 1));
    *m = (thread_msg){.group = x->grp->id, .src = c->rank, .dst = dst, .coll = coll, .tag = tag, .bytes = bytes};
    if (bytes) memcpy(m->data, buf, bytes);
    pthread_mutex_lock(&x->job->mu);
    thread_deliver(x->job, m);
    pthread_mutex_unlock(&x->job->mu);
}

/* Under the lock: removes and returns the first queued message matching, or NULL. */
static thread_msg *thread_find(thread_job *job, int group, int src, int dst, long tag, int coll, int take)
{
    for (thread_msg **p = &job->unexpected; *p; p = &(*p)->next) {
        thread_msg *m = *p;
        if (m->group != group || m->src != src || m->dst != dst || m->tag != tag || m->coll != coll) continue;
        if (take) *p = m->next;
        return m;
    }
    return NULL;
}

static struct timespec thread_deadline(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_nsec * 1e-9 + seconds;
    ts.tv_sec += (time_t)t;
    ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    return ts;
}

/* Blocks for collective message `seq` from src; NULL after c->timeout seconds. */
static thread_msg *thread_take_coll(pp_comm *c, int src, long seq)
{
    thread_ctx *x = thread_ctx_of(c);
    struct timespec until = thread_deadline(c->timeout);
    pthread_mutex_lock(&x->job->mu);
    thread_msg *m;
    while (!(m = thread_find(x->job, x->grp->id, src, c->rank, seq, 1, 1)))
        if (pthread_cond_timedwait(&x->job->cv, &x->job->mu, &until) == ETIMEDOUT) break;
    pthread_mutex_unlock(&x->job->mu);
    return m;
}

static pp_status thread_coll_timeout(pp_comm *c, const char *op, int src, pp_error *err)
{
    return pp_error_set(err, PP_ERR_TIMEOUT, "rank %d: waited %g s in %s for rank %d (thread comm)", c->rank,
                        c->timeout, op, src);
}

static pp_status thread_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                              pp_error *err)
{
    (void)err;
    thread_post(c, buf, bytes, peer, tag, 0);
    *req = calloc(1, sizeof **req);
    (*req)->done = 1;
    return PP_OK;
}

static pp_status thread_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req,
                              pp_error *err)
{
    (void)err;
    thread_ctx *x = thread_ctx_of(c);
    struct pp_request *r = calloc(1, sizeof *r);
    *r = (struct pp_request){.group = x->grp->id, .src = peer, .dst = c->rank, .tag = tag, .buf = buf, .bytes = bytes};
    pthread_mutex_lock(&x->job->mu);
    thread_msg *m = thread_find(x->job, r->group, peer, c->rank, tag, 0, 1);
    if (m) {
        thread_fill(r, m);
    } else {
        struct pp_request **t = &x->job->posted;
        while (*t) t = &(*t)->next;
        *t = r;
    }
    pthread_mutex_unlock(&x->job->mu);
    *req = r;
    return PP_OK;
}

static size_t thread_dtype_size(pp_dtype t)
{
    return t == PP_DTYPE_F32 || t == PP_DTYPE_I32 ? 4 : t == PP_DTYPE_F64 || t == PP_DTYPE_I64 ? 8 : 0;
}

/* dst += src, count elements of dtype t. */
static void thread_add(void *dst, const void *src, size_t count, pp_dtype t)
{
    for (size_t i = 0; i < count; i++) switch (t) {
        case PP_DTYPE_F32: ((float *)dst)[i] += ((const float *)src)[i]; break;
        case PP_DTYPE_F64: ((double *)dst)[i] += ((const double *)src)[i]; break;
        case PP_DTYPE_I32: ((int32_t *)dst)[i] += ((const int32_t *)src)[i]; break;
        default: ((int64_t *)dst)[i] += ((const int64_t *)src)[i]; break;
        }
}

static pp_status thread_iallreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req,
                                   pp_error *err)
{
    size_t es = thread_dtype_size(dtype);
    if (!es)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "thread comm: all-reduce of %s", pp_dtype_name(dtype));
    thread_ctx *x = thread_ctx_of(c);
    struct pp_request *r = calloc(1, sizeof *r);
    *r = (struct pp_request){.reduce = 1, .buf = buf, .dtype = dtype, .count = count, .seq = ++x->coll_seq,
                             .own = malloc(count * es + 1)};
    memcpy(r->own, buf, count * es);
    for (int p = 0; p < c->size; p++)
        if (p != c->rank) thread_post(c, buf, count * es, p, r->seq, 1);
    *req = r;
    return PP_OK;
}

/* The all-reduce's wait: the sum in rank order of every rank's contribution. */
static pp_status thread_finish_reduce(pp_comm *c, struct pp_request *r, pp_error *err)
{
    size_t n = r->count * thread_dtype_size(r->dtype);
    thread_msg **in = calloc((size_t)c->size, sizeof *in);
    pp_status st = PP_OK;
    for (int p = 0; p < c->size && st == PP_OK; p++)
        if (p != c->rank && !(in[p] = thread_take_coll(c, p, r->seq)))
            st = thread_coll_timeout(c, "all-reduce", p, err);
    for (int p = 0; p < c->size && st == PP_OK; p++) {
        const void *v = p == c->rank ? r->own : in[p]->data;
        if (p == 0) memcpy(r->buf, v, n);
        else thread_add(r->buf, v, r->count, r->dtype);
    }
    for (int p = 0; p < c->size; p++) free(in[p]);
    free(in);
    return st;
}

static pp_status thread_wait(pp_comm *c, pp_request *r, pp_error *err)
{
    pp_status st = PP_OK;
    if (r->reduce) {
        st = thread_finish_reduce(c, r, err);
        free(r->own);
        free(r);
        return st;
    }
    thread_ctx *x = thread_ctx_of(c);
    struct timespec until = thread_deadline(c->timeout);
    pthread_mutex_lock(&x->job->mu);
    while (!r->done)
        if (pthread_cond_timedwait(&x->job->cv, &x->job->mu, &until) == ETIMEDOUT) break;
    if (!r->done) {
        for (struct pp_request **p = &x->job->posted; *p; p = &(*p)->next)
            if (*p == r) {
                *p = r->next;
                break;
            }
        st = pp_error_set(err, PP_ERR_TIMEOUT, "rank %d: waited %g s for recv of %zu bytes with rank %d (tag %ld)",
                          c->rank, c->timeout, r->bytes, r->src, r->tag);
    } else if (r->st != PP_OK) {
        st = pp_error_set(err, r->st, "%s", r->msg);
    }
    pthread_mutex_unlock(&x->job->mu);
    free(r);
    return st;
}

static pp_status thread_test(pp_comm *c, pp_request *r, int *done, pp_error *err)
{
    (void)err;
    thread_ctx *x = thread_ctx_of(c);
    pthread_mutex_lock(&x->job->mu);
    if (r->reduce) {
        *done = 1;
        for (int p = 0; p < c->size; p++)
            if (p != c->rank && !thread_find(x->job, x->grp->id, p, c->rank, r->seq, 1, 0)) *done = 0;
    } else {
        *done = r->done;
    }
    pthread_mutex_unlock(&x->job->mu);
    return PP_OK;
}

static pp_status thread_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err)
{
    long seq = ++thread_ctx_of(c)->coll_seq;
    for (int p = 0; p < c->size; p++)
        if (p != c->rank) thread_post(c, in, bytes, p, seq, 1);
    if (bytes) memcpy((char *)out + (size_t)c->rank * bytes, in, bytes);
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        thread_msg *m = thread_take_coll(c, p, seq);
        if (!m) return thread_coll_timeout(c, "allgather", p, err);
        if (bytes) memcpy((char *)out + (size_t)p * bytes, m->data, bytes);
        free(m);
    }
    return PP_OK;
}

static pp_status thread_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err)
{
    long seq = ++thread_ctx_of(c)->coll_seq;
    if (c->rank == root) {
        for (int p = 0; p < c->size; p++)
            if (p != root) thread_post(c, buf, bytes, p, seq, 1);
        return PP_OK;
    }
    thread_msg *m = thread_take_coll(c, root, seq);
    if (!m) return thread_coll_timeout(c, "broadcast", root, err);
    if (bytes) memcpy(buf, m->data, bytes);
    free(m);
    return PP_OK;
}

static pp_status thread_barrier(pp_comm *c, pp_error *err)
{
    return thread_allgather(c, NULL, NULL, 0, err);
}

/* Like MPI_Comm_split: the ranks of one color, ordered by (key, rank); the group is found
 * by (parent, the parent's split count, color), the first rank to arrive makes it. */
static pp_status thread_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err)
{
    thread_ctx *x = thread_ctx_of(c);
    long seq = ++x->split_seq;
    int mine[2] = {color, key}, *all = malloc((size_t)c->size * sizeof mine);
    pp_status st = thread_allgather(c, mine, all, sizeof mine, err);
    if (st != PP_OK || color < 0) {
        free(all);
        return st;
    }
    int size = 0, rank = 0;
    for (int p = 0; p < c->size; p++) {
        if (all[2 * p] != color) continue;
        size++;
        if (all[2 * p + 1] < key || (all[2 * p + 1] == key && p < c->rank)) rank++;
    }
    free(all);
    pthread_mutex_lock(&x->job->mu);
    thread_group *g = x->job->groups;
    while (g && !(g->parent == x->grp->id && g->split_seq == seq && g->color == color)) g = g->next;
    if (!g) {
        g = calloc(1, sizeof *g);
        *g = (thread_group){.next = x->job->groups, .id = x->job->next_group++, .size = size, .parent = x->grp->id,
                            .color = color, .split_seq = seq};
        x->job->groups = g;
    }
    g->refs++;
    pthread_mutex_unlock(&x->job->mu);
    *out = thread_comm_make(x->job, g, rank);
    return PP_OK;
}

static void thread_abort(pp_comm *c, int code)
{
    fprintf(stderr, "rank %d: abort(%d) on the thread comm\n", c->rank, code);
    fflush(stderr);
    _exit(code);
}

static void thread_destroy(pp_comm *c)
{
    thread_ctx *x = thread_ctx_of(c);
    pthread_mutex_lock(&x->job->mu);
    if (--x->grp->refs == 0) {
        thread_group **p = &x->job->groups;
        while (*p != x->grp) p = &(*p)->next;
        *p = x->grp->next;
        free(x->grp);
    }
    pthread_mutex_unlock(&x->job->mu);
    free(x);
    free(c);
}

static const pp_comm_i thread_comm_i = {
    .name = thread_name, .isend = thread_isend, .irecv = thread_irecv, .wait = thread_wait, .test = thread_test,
    .iallreduce = thread_iallreduce, .broadcast = thread_broadcast, .allgather = thread_allgather,
    .barrier = thread_barrier, .split = thread_split, .abort = thread_abort, .destroy = thread_destroy,
};

#endif
