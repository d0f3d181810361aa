/* Per-op-type profile of a stage: time and FLOPs of every forward and backward kernel
 * call, summed by op type, while profiling is on, and on request every call as an event
 * (op, pass, start, end). Times are the device's own: a pair of the device's timers around
 * each call (cuda: timing events on the compute stream, so a kernel's time, not its
 * launch's; the cpu: the host clock), read by pp_stage_profile_flush once the device has
 * run them. Off (the default) it costs the run loop one NULL test per op. FLOPs are the op
 * registry's (graph/ops.c: pp_op_flops), as the partitioner counts them: MatMul/Gemm
 * 2·M·N·K per product (backward: one product per requested gradient of A or B); other ops
 * by their rule (e.g. LayerNorm 8 per element). */
#include "stage_run.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/stage_lib.h>

/* A call whose timers the device may not have reached yet. */
typedef struct pending_call {
    int op, kind;               /* kind: 0 forward, 1 backward, 2 recompute */
    int start, end;             /* timer indices */
    double flops;
} pending_call;

struct stage_profile {
    int *type_of_op;            /* [nops] row index */
    double *flops_of_op;        /* [nops] forward FLOPs of one call (one product for MatMul/Gemm) */
    int *is_gemm;               /* [nops] */
    pp_stage_op_profile *rows;  /* [nrows] in first-seen order */
    pp_stage_op_profile *sorted;/* what pp_stage_profile_get hands out */
    int nrows;
    pp_stage_op_event *events;  /* [nevents of cap] when events are kept */
    int nevents, cap, keep_events;
    void **timers;              /* [ntimers] the device's, reused after each flush; 0: the anchor */
    int ntimers, ctimers, used; /* created, room for, recorded since the last flush */
    double anchor_host;         /* pp_now() just before timer 0 was recorded (record_anchor) */
    pending_call *pend;         /* [npend of cpend] */
    int npend, cpend;
};

/* Forward FLOPs of op o by the registry's FLOP model (graph/ops.c: pp_op_flops) over its
 * tslots' shapes; *gemm: a matrix product, whose backward costs one such product per
 * input gradient asked for. */
static double op_flops(const pp_stage *s, const stage_op *op, int *gemm)
{
    const pp_op_info *oi = pp_op_get(op->op);
    *gemm = oi->flop_rule == PP_FLOPS_MATMUL || oi->flop_rule == PP_FLOPS_GEMM;
    if (op->nout < 1 || op->out[0] < 0) return 0;
    pp_shape sh[PP_OP_MAX_INPUTS], y = pp_shape_make(s->t[op->out[0]].rank, s->t[op->out[0]].dims);
    const pp_shape *in[PP_OP_MAX_INPUTS] = {NULL};
    int nin = op->nin < PP_OP_MAX_INPUTS ? op->nin : PP_OP_MAX_INPUTS;
    for (int k = 0; k < nin; k++)
        if (op->in[k] >= 0) {
            sh[k] = pp_shape_make(s->t[op->in[k]].rank, s->t[op->in[k]].dims);
            in[k] = &sh[k];
        }
    int over = 0;
    int64_t f = pp_op_flops(op->op, op->attrs, op->nattrs, in, nin, &y, &over);
    return f > 0 && !over ? (double)f : 0;
}

void stage_profile_free(pp_stage *s)
{
    stage_profile *p = s->prof;
    s->prof = NULL;
    if (!p) return;
    for (int i = 0; i < p->ntimers; i++) pp_device_timer_destroy(s->dev, p->timers[i]);
    free(p->timers);
    free(p->pend);
    free(p->type_of_op);
    free(p->flops_of_op);
    free(p->is_gemm);
    free(p->rows);
    free(p->sorted);
    free(p->events);
    free(p);
}

pp_status pp_stage_profile_enable(pp_stage *s, int on, pp_error *err)
{
    stage_profile_free(s);
    if (!on) return PP_OK;
    stage_profile *p = calloc(1, sizeof *p);
    int n = s->nops > 0 ? s->nops : 1;
    if (p) {
        p->type_of_op = calloc((size_t)n, sizeof *p->type_of_op);
        p->flops_of_op = calloc((size_t)n, sizeof *p->flops_of_op);
        p->is_gemm = calloc((size_t)n, sizeof *p->is_gemm);
        p->rows = calloc((size_t)n, sizeof *p->rows);
        p->sorted = calloc((size_t)n, sizeof *p->sorted);
    }
    if (!p || !p->type_of_op || !p->flops_of_op || !p->is_gemm || !p->rows || !p->sorted) {
        s->prof = p;
        stage_profile_free(s);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the stage profile (%d ops)", s->nops);
    }
    for (int o = 0; o < s->nops; o++) {
        const stage_op *op = &s->ops[o];
        int r = 0;
        while (r < p->nrows && strcmp(p->rows[r].op_type, op->op_type)) r++;
        if (r == p->nrows) p->rows[p->nrows++].op_type = op->op_type;
        p->type_of_op[o] = r;
        p->flops_of_op[o] = op_flops(s, op, &p->is_gemm[o]);
    }
    s->prof = p;
    return PP_OK;
}

int pp_stage_profiling(const pp_stage *s) { return s->prof != NULL; }

void pp_stage_profile_reset(pp_stage *s)
{
    if (!s->prof) return;
    for (int r = 0; r < s->prof->nrows; r++) {
        const char *t = s->prof->rows[r].op_type;
        memset(&s->prof->rows[r], 0, sizeof s->prof->rows[r]);
        s->prof->rows[r].op_type = t;
    }
}

static void keep_event(stage_profile *p, int o, int backward, double t_start, double t_end, double flops)
{
    if (p->nevents == p->cap) {
        int cap = p->cap ? 2 * p->cap : 1024;
        pp_stage_op_event *e = pp_realloc_array(p->events, (size_t)cap, sizeof *e);
        if (!e) return;   /* the events stop; the sums go on */
        p->events = e;
        p->cap = cap;
    }
    p->events[p->nevents++] = (pp_stage_op_event){o, backward, t_start, t_end, flops};
}

/* The anchor's host time is known within this: a record whose two host readings lie
 * further apart (the thread preempted between them) is made again, 5 records at most (the
 * last is kept whatever its gap: only 5 preemptions in a row exceed the slack). */
#define ANCHOR_SLACK_S 20e-6

static pp_status record_anchor(pp_stage *s, pp_error *err)
{
    stage_profile *p = s->prof;
    for (int tries = 0;; tries++) {
        const double before = pp_now();
        PP_CHECK(pp_device_timer_record(s->dev, p->timers[0], err));
        if (pp_now() - before <= ANCHOR_SLACK_S || tries == 4) {
            p->anchor_host = before;
            return PP_OK;
        }
    }
}

/* Records the next timer of the pool (made the first time it is needed); the first of a
 * span is the anchor, whose host time maps the device's clock onto pp_now(). */
static pp_status mark(pp_stage *s, int *index, pp_error *err)
{
    stage_profile *p = s->prof;
    for (int want = p->used == 0 ? 2 : 1; p->ntimers < p->used + want;) {
        if (p->ntimers == p->ctimers) {
            int cap = p->ctimers ? 2 * p->ctimers : 512;
            void **t = pp_realloc_array(p->timers, (size_t)cap, sizeof *t);
            if (!t) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the profiler's timers");
            p->timers = t;
            p->ctimers = cap;
        }
        PP_CHECK(pp_device_timer_create(s->dev, &p->timers[p->ntimers], err));
        p->ntimers++;
    }
    if (p->used == 0) {
        PP_CHECK(record_anchor(s, err));
        p->used = 1;
    }
    *index = p->used;
    return pp_device_timer_record(s->dev, p->timers[p->used++], err);
}

pp_status stage_profile_begin(pp_stage *s, int *start, pp_error *err) { return mark(s, start, err); }

pp_status stage_profile_add(pp_stage *s, int o, const pp_tensor *grad_in, int rerun, int start, pp_error *err)
{
    stage_profile *p = s->prof;
    int end;
    PP_CHECK(mark(s, &end, err));
    double f = p->flops_of_op[o];
    if (grad_in && p->is_gemm[o]) /* one product per requested gradient of A, B (Gemm's C: ignored) */
        f *= (double)((grad_in[0].data != NULL) + (s->ops[o].nin > 1 && grad_in[1].data != NULL));
    if (p->npend == p->cpend) {
        int cap = p->cpend ? 2 * p->cpend : 1024;
        pending_call *c = pp_realloc_array(p->pend, (size_t)cap, sizeof *c);
        if (!c) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the profiler's calls");
        p->pend = c;
        p->cpend = cap;
    }
    p->pend[p->npend++] = (pending_call){o, rerun ? 2 : grad_in != NULL, start, end, f};
    return PP_OK;
}

pp_status pp_stage_profile_flush(pp_stage *s, pp_error *err)
{
    stage_profile *p = s->prof;
    if (!p) return PP_OK;
    pp_status st = PP_OK;
    for (int i = 0; i < p->npend && st == PP_OK; i++) {
        const pending_call *c = &p->pend[i];
        double from_anchor = 0, seconds = 0;
        st = pp_device_timer_elapsed(s->dev, p->timers[0], p->timers[c->start], &from_anchor, err);
        if (st == PP_OK) st = pp_device_timer_elapsed(s->dev, p->timers[c->start], p->timers[c->end], &seconds, err);
        if (st != PP_OK) break;
        pp_stage_op_profile *row = &p->rows[p->type_of_op[c->op]];
        if (c->kind == 2) {
            row->recompute_calls++;
            row->recompute_s += seconds;
        } else if (c->kind == 0) {
            row->forward_calls++;
            row->forward_s += seconds;
            row->forward_flops += c->flops;
        } else {
            row->backward_calls++;
            row->backward_s += seconds;
            row->backward_flops += c->flops;
        }
        const double t0 = p->anchor_host + from_anchor;
        if (p->keep_events) keep_event(p, c->op, c->kind, t0, t0 + seconds, c->flops);
    }
    p->npend = 0;
    p->used = 0;
    return st;
}

pp_status pp_stage_profile_events(pp_stage *s, int on, pp_error *err)
{
    if (!s->prof)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "events need profiling on (pp_stage_profile_enable)");
    s->prof->keep_events = on != 0;
    return PP_OK;
}

const pp_stage_op_event *pp_stage_profile_get_events(const pp_stage *s, int *n)
{
    *n = s->prof ? s->prof->nevents : 0;
    return s->prof ? s->prof->events : NULL;
}

void pp_stage_profile_clear_events(pp_stage *s)
{
    if (s->prof) s->prof->nevents = 0;
}

int pp_stage_num_ops(const pp_stage *s) { return s->nops; }

static void shape_text(const tslot *t, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->rank && o < len; d++) o += (size_t)snprintf(buf + o, len - o, d ? ",%lld" : "%lld",
                                                                        (long long)t->dims[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

void pp_stage_op_describe(const pp_stage *s, int o, pp_stage_op_info *out)
{
    const stage_op *op = &s->ops[o];
    int gemm;
    *out = (pp_stage_op_info){.name = op->name, .op_type = op->op_type, .flops = op_flops(s, op, &gemm),
                              .attrs = op->attrs, .nattrs = op->nattrs};
    size_t n = 0, len = sizeof out->shapes;
    for (int k = 0; k < op->nin + op->nout && n + 1 < len; k++) {
        int t = k < op->nin ? op->in[k] : op->out[k - op->nin];
        if (k == op->nin) n += (size_t)snprintf(out->shapes + n, len - n, " -> ");
        else if (k) n += (size_t)snprintf(out->shapes + n, len - n, " ");
        if (n + 1 >= len) break;
        char one[64] = "-";
        if (t >= 0) shape_text(&s->t[t], one, sizeof one);
        n += (size_t)snprintf(out->shapes + n, len - n, "%s", one);
    }
}

static int by_time_desc(const void *a, const void *b)
{
    const pp_stage_op_profile *x = a, *y = b;
    double tx = x->forward_s + x->backward_s + x->recompute_s, ty = y->forward_s + y->backward_s + y->recompute_s;
    return (tx < ty) - (tx > ty);
}

const pp_stage_op_profile *pp_stage_profile_get(pp_stage *s, int *n)
{
    *n = 0;
    if (!s->prof) return NULL;
    memcpy(s->prof->sorted, s->prof->rows, (size_t)s->prof->nrows * sizeof *s->prof->rows);
    qsort(s->prof->sorted, (size_t)s->prof->nrows, sizeof *s->prof->sorted, by_time_desc);
    *n = s->prof->nrows;
    return s->prof->sorted;
}
