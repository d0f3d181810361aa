/* The NCCL watchdog (CUDA builds only). The step never blocks the host on NCCL: a wait
 * only orders the compute stream after the operation. So a thread looks, every 20 ms, at
 * each live communicator's oldest operation in flight and at ncclCommGetAsyncError; on an
 * error, or an operation in flight longer than the communicator's timeout, it aborts every
 * NCCL communicator of the process (the kernels waiting on them end, so the caller's next
 * stream synchronisation returns) and every later call fails with the first error. Should
 * the job still be alive LAST_RESORT_S seconds later (its thread stuck inside a NCCL call
 * that waits for a dead peer, or the abort itself hung), a reaper thread ends it with
 * MPI_Abort; so does the watchdog when a NCCL call has held the lock longer than the
 * timeout. An operation's time in flight counts from when the one before it on its stream
 * finished, not from when it was queued, so work queued early never times out. */
#include "nccl_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WATCH_PERIOD_NS 20000000L
#define LAST_RESORT_S 10.0

static pthread_mutex_t nccl_mu = PTHREAD_MUTEX_INITIALIZER;   /* nccl_lock; guards live and each ctx */
static _Atomic(const char *) busy_what;   /* the call the lock holder is inside, NULL when none */
static const char destroy_what[] = "ncclCommDestroy";
static _Atomic double busy_since;
static nccl_ctx *live;
static _Atomic double longest_timeout;    /* of the live communicators, for a call that blocks */

static _Atomic int failed;                /* set after fail_msg is written */
static char fail_msg[PP_ERROR_LEN];
static _Atomic int generation;            /* bumped when a failure is forgotten */
static _Atomic int ended;                 /* end_job ran */

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;    /* the thread's start, sleep and stop */
static pthread_cond_t ctl_cv = PTHREAD_COND_INITIALIZER;
static pthread_t watcher;
static int running, stopping;

void nccl_lock(const char *what)
{
    pthread_mutex_lock(&nccl_mu);
    atomic_store(&busy_since, pp_now());
    atomic_store(&busy_what, what);
}

void nccl_unlock(void)
{
    atomic_store(&busy_what, NULL);
    pthread_mutex_unlock(&nccl_mu);
}

int nccl_failed(const nccl_ctx *x, const char *op, pp_error *err)
{
    if (!atomic_load(&failed)) return 0;
    pp_error_set(err, PP_ERR_COMM, "rank %d: nccl %s refused, the NCCL communicators were aborted: %s", x->owner->rank,
                 op, fail_msg);
    return 1;
}

static void end_job(const char *why)
{
    if (atomic_exchange(&ended, 1)) return;
    pp_log(PP_LOG_ERROR, "%s; ending the job (MPI_Abort)", why);
    pp_comm_mpi_abort_world(1);
}

/* Sleeps LAST_RESORT_S, then ends the job unless the failure it was started for has been
 * forgotten (every communicator destroyed) or the process has ended meanwhile. */
static void *reaper(void *arg)
{
    int gen = (int)(intptr_t)arg;
    struct timespec ts = {(time_t)LAST_RESORT_S, 0};
    while (nanosleep(&ts, &ts) != 0) continue;
    if (atomic_load(&failed) && atomic_load(&generation) == gen) {
        char why[PP_ERROR_LEN + 96];
        snprintf(why, sizeof why, "%s; the job did not end within %g s after the NCCL communicators were aborted",
                 fail_msg, LAST_RESORT_S);
        end_job(why);
    }
    return NULL;
}

void nccl_fail_all(const char *msg)
{
    if (!atomic_load(&failed)) {
        snprintf(fail_msg, sizeof fail_msg, "%s", msg);
        atomic_store(&failed, 1);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_create(&t, &attr, reaper, (void *)(intptr_t)atomic_load(&generation));
        pthread_attr_destroy(&attr);
    }
    for (nccl_ctx *x = live; x; x = x->next_live)
        if (!x->aborted) {
            x->aborted = 1;
            ncclCommAbort(x->comm);
        }
}

/* Drops the finished operations at the head of x's ring (the next one's time in flight
 * starts now); an error text for a stream that failed. */
static const char *retire(nccl_ctx *x)
{
    while (x->count) {
        cudaError_t e = cudaEventQuery(x->flight[x->head].done);
        if (e == cudaErrorNotReady) return NULL;
        if (e != cudaSuccess) return cudaGetErrorString(e);
        x->head = (x->head + 1) % NCCL_MAX_IN_FLIGHT;
        if (--x->count) {
            double now = pp_now();
            nccl_flight *next = &x->flight[x->head];
            if (next->since < now) next->since = now;
        }
    }
    return NULL;
}

pp_status nccl_watch_push(nccl_ctx *x, const char *what, pp_error *err)
{
    for (double t0 = pp_now();;) {
        const char *bad = retire(x);
        if (bad)
            return pp_error_set(err, PP_ERR_DEVICE, "rank %d: the nccl stream failed before %s: %s", x->owner->rank,
                                what, bad);
        if (x->count < NCCL_MAX_IN_FLIGHT) break;
        nccl_unlock();   /* let the watchdog judge the oldest operation meanwhile */
        comm_poll_pause(pp_now() - t0);
        nccl_lock("waiting for a free slot of the in-flight ring");
        if (nccl_failed(x, what, err)) return PP_ERR_COMM;
    }
    nccl_flight *f = &x->flight[(x->head + x->count) % NCCL_MAX_IN_FLIGHT];
    cudaError_t e = cudaEventRecord(f->done, x->stream);
    if (e != cudaSuccess)
        return pp_error_set(err, PP_ERR_DEVICE, "rank %d: recording the completion of nccl %s failed: %s",
                            x->owner->rank, what, cudaGetErrorString(e));
    f->since = pp_now();
    snprintf(f->what, sizeof f->what, "%s", what);
    x->count++;
    return PP_OK;
}

/* What is wrong with x, written to msg (left empty when nothing is). */
static void judge(nccl_ctx *x, double now, char *msg, size_t n)
{
    if (x->aborted) return;
    cudaSetDevice(x->device);
    const char *bad = retire(x);
    const pp_comm *c = x->owner;
    if (bad) {
        snprintf(msg, n, "rank %d: the nccl stream failed after %s: %s", c->rank, x->flight[x->head].what, bad);
        return;
    }
    if (x->count && now - x->flight[x->head].since > c->timeout) {
        snprintf(msg, n,
                 "rank %d: nccl %s has not completed after %.1f s; is every rank it involves alive and calling it? "
                 "(PP_COMM_TIMEOUT=%g s)",
                 c->rank, x->flight[x->head].what, now - x->flight[x->head].since, c->timeout);
        return;
    }
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(x->comm, &async);
    if (r == ncclSuccess) r = async;
    if (r != ncclSuccess && r != ncclInProgress)
        snprintf(msg, n, "rank %d: NCCL reported an error on a communicator of %d ranks: %s (%s)", c->rank, c->size,
                 ncclGetErrorString(r), ncclGetLastError(x->comm));
}

static void scan(void)
{
    if (atomic_load(&failed)) return;   /* the reaper has it */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += WATCH_PERIOD_NS * 5;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    if (pthread_mutex_timedlock(&nccl_mu, &deadline) != 0) {
        /* the job's thread is inside a NCCL call (a split or a group waiting for its peers) */
        const char *what = atomic_load(&busy_what);
        double now = pp_now(), since = atomic_load(&busy_since), limit = atomic_load(&longest_timeout);
        /* not timed: ncclCommDestroy waits for every rank of the node (NCCL's docs), and at a
         * job's end rank 0 may still be writing the exported model, for as long as that
         * takes; a rank that died instead ends the job through mpirun */
        if (what && what != destroy_what && now - since > limit) {
            char why[PP_ERROR_LEN];
            snprintf(why, sizeof why, "%s has blocked for %.1f s (PP_COMM_TIMEOUT=%g s); is every rank alive?", what,
                     now - since, limit);
            end_job(why);
        }
        return;
    }
    char msg[PP_ERROR_LEN] = "";
    double now = pp_now();
    for (nccl_ctx *x = live; x && !msg[0]; x = x->next_live) {
        if (x->owner->timeout > atomic_load(&longest_timeout)) atomic_store(&longest_timeout, x->owner->timeout);
        judge(x, now, msg, sizeof msg);
    }
    if (msg[0]) nccl_fail_all(msg);
    pthread_mutex_unlock(&nccl_mu);
}

static void *watch_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ctl_mu);
    while (!stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_PERIOD_NS;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&ctl_cv, &ctl_mu, &ts);
        if (stopping) break;
        pthread_mutex_unlock(&ctl_mu);
        scan();
        pthread_mutex_lock(&ctl_mu);
    }
    pthread_mutex_unlock(&ctl_mu);
    return NULL;
}

pp_status nccl_watch_add(nccl_ctx *x, pp_error *err)
{
    pthread_mutex_lock(&ctl_mu);
    int rc = running ? 0 : pthread_create(&watcher, NULL, watch_main, NULL);
    if (!rc) running = 1;
    pthread_mutex_unlock(&ctl_mu);
    if (rc)
        return pp_error_set(err, PP_ERR_COMM, "rank %d: cannot start the NCCL watchdog thread: %s", x->owner->rank,
                            strerror(rc));
    nccl_lock("registering a communicator");
    x->next_live = live;
    live = x;
    if (x->owner->timeout > atomic_load(&longest_timeout)) atomic_store(&longest_timeout, x->owner->timeout);
    nccl_unlock();
    return PP_OK;
}

void nccl_watch_remove(nccl_ctx *x)
{
    nccl_lock(destroy_what);
    if (x->comm && !x->aborted) ncclCommDestroy(x->comm);
    x->aborted = 1;
    nccl_ctx **p = &live;
    while (*p && *p != x) p = &(*p)->next_live;
    if (*p) *p = x->next_live;
    int last = !live;
    if (last && atomic_load(&failed)) {
        atomic_fetch_add(&generation, 1);
        atomic_store(&failed, 0);
    }
    nccl_unlock();
    if (!last) return;
    pthread_mutex_lock(&ctl_mu);
    int join = running;
    stopping = 1;
    pthread_cond_signal(&ctl_cv);
    pthread_mutex_unlock(&ctl_mu);
    if (join) pthread_join(watcher, NULL);
    pthread_mutex_lock(&ctl_mu);
    running = stopping = 0;
    pthread_mutex_unlock(&ctl_mu);
}
