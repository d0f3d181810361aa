/* Lowering: turns a compute-only order into the full per-rank action lists. A unit-cost
 * run of the compute order gives every compute action a time; each SEND goes right after
 * the compute that produces its data and its RECV is placed on the receiver at that same
 * instant. All ranks then order their actions by one global key, so a pair is always the
 * next pair both sides reach: no cycle of ranks can wait on each other (DESIGN.md). */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

/* Global order key: time, then communication before compute at equal time, then the
 * sending rank and the data's identity so that each SEND/RECV pair has its own key. */
typedef struct keyed {
    double t;
    int cls;     /* 0 communication, 1 compute */
    int rank;    /* sender for communication, owner for compute */
    int seq;     /* compute: index on its rank; comm: (stage * 2 + dir) */
    int mb;
    pp_action a;
} keyed;

static int keyed_cmp(const void *pa, const void *pb)
{
    const keyed *x = pa, *y = pb;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->cls != y->cls) return x->cls - y->cls;
    if (x->rank != y->rank) return x->rank - y->rank;
    if (x->seq != y->seq) return x->seq - y->seq;
    return x->mb - y->mb;
}

static keyed comm_key(double t, int sender, int stage, int dir, int kind, int ast, int mb, int peer)
{
    keyed k = {t, 0, sender, stage * 2 + dir, mb, {kind, ast, mb, peer}};
    return k;
}

pp_status pp_schedule_lower(pp_schedule *s, pp_error *err)
{
    if (s->lowered) return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule is already lowered");
    pp_costs unit;
    pp_costs_unit(&unit);
    engine e;
    pp_status st = PP_OK;
    keyed *buf = NULL;
    PP_CHECK(engine_init(&e, s, RUN_COMPUTE_ONLY, &unit, 0, err));
    st = engine_run(&e, err);
    if (st == PP_OK) st = engine_check_complete(&e, err);
    if (st != PP_OK) {
        pp_error_prefix(err, "the compute order cannot run: ");
        goto done;
    }
    int maxn = 0, S = s->num_stages;
    for (int r = 0; r < s->pp; r++) maxn = s->count[r] > maxn ? s->count[r] : maxn;
    /* own: the rank's compute with each SEND right after it, already in key order;
     * recv: its receives, usually in key order too (sorted when not); then merged. */
    buf = pp_malloc((size_t)(5 * maxn + 1) * sizeof *buf);
    if (!buf) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory lowering the schedule");
        goto done;
    }
    keyed *own = buf, *recv = buf + 3 * maxn;
    for (int r = 0; r < s->pp; r++) {
        int n = 0, nr = 0, sorted = 1;
        for (int i = 0; i < s->count[r]; i++) {
            pp_action a = s->actions[r][i];
            int g = e.offset[r] + i, stg = a.stage, mb = a.microbatch;
            keyed c = {e.start[g], 1, r, i, 0, a};
            own[n++] = c;
            int bwd = a.kind == PP_ACT_BACKWARD || a.kind == PP_ACT_BACKWARD_INPUT;
            if (a.kind == PP_ACT_FORWARD && stg + 1 < S && s->stage_rank[stg + 1] != r)
                own[n++] = comm_key(e.end[g], r, stg, 0, PP_ACT_SEND_ACT, stg, mb, s->stage_rank[stg + 1]);
            if (bwd && stg > 0 && s->stage_rank[stg - 1] != r)
                own[n++] = comm_key(e.end[g], r, stg, 1, PP_ACT_SEND_GRAD, stg, mb, s->stage_rank[stg - 1]);
            /* The receives this action needs, keyed like the sender's SEND. */
            if (a.kind == PP_ACT_FORWARD && stg > 0 && s->stage_rank[stg - 1] != r) {
                int q = s->stage_rank[stg - 1];
                double sent = e.tok[engine_tok_id(&e, TOK_FWD, stg - 1, mb)];  /* the sender's end */
                recv[nr++] = comm_key(sent, q, stg - 1, 0, PP_ACT_RECV_ACT, stg, mb, q);
            }
            if (bwd && stg + 1 < S && s->stage_rank[stg + 1] != r) {
                int q = s->stage_rank[stg + 1];
                double sent = e.tok[engine_tok_id(&e, TOK_BIN, stg + 1, mb)];
                recv[nr++] = comm_key(sent, q, stg + 1, 1, PP_ACT_RECV_GRAD, stg, mb, q);
            }
            if (nr > 1 && sorted && keyed_cmp(&recv[nr - 2], &recv[nr - 1]) > 0) sorted = 0;
        }
        if (!sorted) qsort(recv, (size_t)nr, sizeof *recv, keyed_cmp);
        PP_CHECK_GOTO(schedule_reserve(s, r, n + nr, err), st, done);
        pp_action *out = s->actions[r];
        for (int i = 0, j = 0; i < n || j < nr;)
            *out++ = (j == nr || (i < n && keyed_cmp(&own[i], &recv[j]) < 0)) ? own[i++].a : recv[j++].a;
        s->count[r] = n + nr;
    }
    s->lowered = 1;
    st = pp_schedule_finish(s, err);
done:
    free(buf);
    engine_free(&e);
    return st;
}

pp_status pp_schedule_finish(pp_schedule *s, pp_error *err)
{
    int S = s->num_stages;
    int *last = pp_malloc((size_t)S * sizeof *last);  /* [S] index of the stage's last backward */
    pp_action *row = NULL;
    pp_status st = PP_OK;
    if (!last) return PP_NOMEM(err);
    for (int r = 0; r < s->pp; r++)
        for (int i = 0; i < s->count[r]; i++) {
            int k = s->actions[r][i].kind;
            if (k == PP_ACT_REDUCE_GRADS || k == PP_ACT_OPTIMIZER_STEP) {
                st = pp_error_set(err, PP_ERR_INVALID_ARG,
                                  "rank %d action %d: the schedule already has REDUCE_GRADS/OPTIMIZER_STEP", r, i);
                goto done;
            }
        }
    for (int r = 0; r < s->pp; r++) {
        int n = s->count[r];
        for (int t = 0; t < S; t++) last[t] = -1;
        for (int i = 0; i < n; i++) {
            const pp_action *a = &s->actions[r][i];
            if (a->kind == PP_ACT_BACKWARD || a->kind == PP_ACT_BACKWARD_WEIGHT) last[a->stage] = i;
        }
        free(row);
        row = pp_malloc((size_t)n * sizeof *row);
        if (n && !row) {
            st = PP_NOMEM(err);
            goto done;
        }
        if (n) memcpy(row, s->actions[r], (size_t)n * sizeof *row);
        s->count[r] = 0;
        int pending = -1;  /* stage whose REDUCE_GRADS goes in after the sends that follow */
        for (int i = 0; i < n; i++) {
            int k = row[i].kind;
            if (pending >= 0 && k != PP_ACT_SEND_ACT && k != PP_ACT_SEND_GRAD) {
                pp_action red = {PP_ACT_REDUCE_GRADS, pending, -1, -1};
                PP_CHECK_GOTO(pp_schedule_append(s, r, red, err), st, done);
                pending = -1;
            }
            PP_CHECK_GOTO(pp_schedule_append(s, r, row[i], err), st, done);
            if ((k == PP_ACT_BACKWARD || k == PP_ACT_BACKWARD_WEIGHT) && last[row[i].stage] == i)
                pending = row[i].stage;
        }
        if (pending >= 0) {
            pp_action red = {PP_ACT_REDUCE_GRADS, pending, -1, -1};
            PP_CHECK_GOTO(pp_schedule_append(s, r, red, err), st, done);
        }
        pp_action opt = {PP_ACT_OPTIMIZER_STEP, -1, -1, -1};
        PP_CHECK_GOTO(pp_schedule_append(s, r, opt, err), st, done);
    }
    s->lowered = 1;
done:
    free(row);
    free(last);
    return st;
}
