/* --straggler-warn F: every step each rank's busy time (its step less the time it was
 * blocked on peers: compute, data, its own overheads) goes to every rank; over a window
 * of STRAGGLER_WINDOW steps, a rank whose median exceeds F x the median of its pipeline
 * peers' medians (the other stages of its replica; at pp=1 the other replicas) is named. Also the
 * fault injection that tests it (PP_DEBUG_SLOW_RANK). */
#include "job_internal.h"
#include <onnxpipe/env.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STRAGGLER_WINDOW 10

struct train_straggler {
    pp_comm *world;
    double factor;
    int64_t steps;              /* steps seen */
    double *busy;               /* [STRAGGLER_WINDOW][size] busy seconds, a ring */
    double *mine;               /* [2]: this rank's busy time and replica, gathered */
    double *all;                /* [size][2] */
    double *peers;              /* [size] scratch for the median */
    double *typical;            /* [size] each rank's median over the window */
    int slow_rank;              /* PP_DEBUG_SLOW_RANK: this rank sleeps slow_s per fed microbatch */
    double slow_s;
};

pp_status train_straggler_open(double factor, pp_comm *world, train_straggler **out, pp_error *err)
{
    *out = NULL;
    train_straggler *s = calloc(1, sizeof *s);
    if (!s) return PP_NOMEM(err);
    int n = pp_comm_size(world);
    s->world = world;
    s->factor = factor;
    s->slow_rank = -1;
    s->busy = calloc((size_t)STRAGGLER_WINDOW * (size_t)n, sizeof *s->busy);
    s->all = calloc((size_t)n * 2, sizeof *s->all);
    s->mine = calloc(2, sizeof *s->mine);
    s->peers = calloc((size_t)n, sizeof *s->peers);
    s->typical = calloc((size_t)n, sizeof *s->typical);
    if (!s->busy || !s->all || !s->mine || !s->peers || !s->typical) {
        train_straggler_close(s);
        return PP_NOMEM(err);
    }
    const char *slow = pp_env_get("PP_DEBUG_SLOW_RANK");   /* RANK:SECONDS, for tests */
    if (slow && sscanf(slow, "%d:%lf", &s->slow_rank, &s->slow_s) != 2) {
        train_straggler_close(s);
        return pp_error_set(err, PP_ERR_INVALID_ARG, "PP_DEBUG_SLOW_RANK='%s': expected RANK:SECONDS (e.g. 1:0.02)",
                            slow);
    }
    *out = s;
    return PP_OK;
}

void train_straggler_inject(const train_straggler *s)
{
    if (!s || s->slow_rank != pp_comm_rank(s->world) || !(s->slow_s > 0)) return;
    struct timespec ts = {(time_t)s->slow_s, (long)((s->slow_s - (double)(time_t)s->slow_s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)   /* sorts v */
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Rank r's median busy time over the window: one slow step (a page fault, the OS) is
 * no straggler. */
static double window_median(const train_straggler *s, int r)
{
    double v[STRAGGLER_WINDOW];
    for (int k = 0; k < STRAGGLER_WINDOW; k++) v[k] = s->busy[(size_t)k * (size_t)pp_comm_size(s->world) + (size_t)r];
    return median_of(v, STRAGGLER_WINDOW);
}

pp_status train_straggler_step(train_straggler *s, double busy_s, int replica, train_straggler_note *note,
                               pp_error *err)
{
    *note = (train_straggler_note){.rank = -1};
    if (!s) return PP_OK;
    int n = pp_comm_size(s->world);
    s->mine[0] = busy_s;
    s->mine[1] = replica;
    PP_CHECK(pp_comm_allgather(s->world, s->mine, s->all, 2 * sizeof *s->mine, err));
    double *row = s->busy + (size_t)(s->steps % STRAGGLER_WINDOW) * (size_t)n;
    for (int r = 0; r < n; r++) row[r] = s->all[2 * r];
    if (++s->steps < STRAGGLER_WINDOW || n < 2) return PP_OK;
    int pipeline_peers = 0;   /* pp = 1: every replica is a pipeline of one; compare across them */
    for (int r = 1; r < n; r++) pipeline_peers |= s->all[2 * r + 1] == s->all[1];
    for (int r = 0; r < n; r++) s->typical[r] = window_median(s, r);
    for (int r = 0; r < n; r++) {
        int np = 0;
        for (int q = 0; q < n; q++)
            if (q != r && (!pipeline_peers || s->all[2 * q + 1] == s->all[2 * r + 1])) s->peers[np++] = s->typical[q];
        if (!np) continue;
        double median = median_of(s->peers, np), ratio = median > 0 ? s->typical[r] / median : 0;
        if (ratio > s->factor && ratio > note->ratio)
            *note = (train_straggler_note){.rank = r, .ratio = ratio, .busy_s = s->typical[r], .median_s = median};
    }
    return PP_OK;
}

void train_straggler_close(train_straggler *s)
{
    if (!s) return;
    free(s->busy);
    free(s->all);
    free(s->mine);
    free(s->peers);
    free(s->typical);
    free(s);
}
