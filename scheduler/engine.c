/* The schedule engine: runs every rank's action list together, each rank as far as its
 * dependencies allow, with dependencies expressed as tokens (one per event per
 * (stage, microbatch)). Validator, simulator and lowering are three modes of this loop;
 * each action is visited once and each rank is woken only by a token it waits for. */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

long engine_tok_id(const engine *e, int type, int stage, int mb)
{
    return ((long)stage * e->s->microbatches + mb) * TOK_COUNT + type;
}
#define tok_id engine_tok_id

const pp_stage_cost *stage_cost(const pp_costs *c, int stage)
{
    return (c->stage && stage >= 0 && stage < c->num_stages) ? &c->stage[stage] : &c->uniform;
}

/* Duration of compute action a (global index g) under costs (0 for communication). */
static double action_cost(const pp_costs *c, const pp_action *a, long g)
{
    if (!c) return 0;
    if (c->action && a->kind >= PP_ACT_FORWARD && a->kind <= PP_ACT_BACKWARD_WEIGHT && c->action[g] >= 0)
        return c->action[g];
    const pp_stage_cost *sc = stage_cost(c, a->stage);
    switch (a->kind) {
    case PP_ACT_FORWARD: return sc->forward;
    case PP_ACT_BACKWARD: return sc->backward_input + sc->backward_weight;
    case PP_ACT_BACKWARD_INPUT: return sc->backward_input;
    case PP_ACT_BACKWARD_WEIGHT: return sc->backward_weight;
    case PP_ACT_OPTIMIZER_STEP: return c->optimizer;
    default: return 0;
    }
}

/* s for a message crossing the boundary after stage `boundary`. */
static double transfer_time(const pp_costs *c, int boundary)
{
    if (!c) return 0;
    const pp_stage_cost *sc = stage_cost(c, boundary);
    return c->send_latency + sc->send_time + (c->bandwidth > 0 ? sc->send_bytes / c->bandwidth : 0);
}

pp_status engine_init(engine *e, const pp_schedule *s, run_mode mode, const pp_costs *costs,
                      int want_path, pp_error *err)
{
    memset(e, 0, sizeof *e);
    e->s = s;
    e->mode = mode;
    e->costs = costs;
    e->want_path = want_path;
    int p = s->pp, S = s->num_stages;
    long ntok = (long)TOK_COUNT * S * s->microbatches;
    e->offset = pp_calloc((size_t)p + 1, sizeof *e->offset);
    if (!e->offset) return pp_error_set(err, PP_ERR_NOMEM, "schedule engine: out of memory");
    for (int r = 0; r < p; r++) e->offset[r + 1] = e->offset[r] + s->count[r];
    long nact = e->offset[p];
    int timed = mode != RUN_RENDEZVOUS;
    /* Presence in one byte per token keeps the validator's working set small; times
     * only when they matter (not under rendezvous, where only order counts). */
    e->seen = pp_calloc((size_t)ntok, 1);
    e->tok = timed ? pp_malloc((size_t)ntok * sizeof *e->tok) : NULL;
    e->tok_src = want_path ? pp_malloc((size_t)ntok * sizeof *e->tok_src) : NULL;
    e->start = timed ? pp_calloc((size_t)nact + 1, sizeof *e->start) : NULL;
    e->end = timed ? pp_calloc((size_t)nact + 1, sizeof *e->end) : NULL;
    e->pred = want_path ? pp_calloc((size_t)nact + 1, sizeof *e->pred) : NULL;
    e->pc = pp_calloc((size_t)p, sizeof *e->pc);
    e->blocked = pp_calloc((size_t)p, sizeof *e->blocked);
    e->clock = pp_calloc((size_t)p, sizeof *e->clock);
    e->clock_src = pp_calloc((size_t)p, sizeof *e->clock_src);
    e->stack = pp_calloc((size_t)p, sizeof *e->stack);
    e->wdone = pp_calloc((size_t)S, sizeof *e->wdone);
    e->reduced = pp_calloc((size_t)S, sizeof *e->reduced);
    e->reduce_end = pp_calloc((size_t)p, sizeof *e->reduce_end);
    e->reduce_src = pp_calloc((size_t)p, sizeof *e->reduce_src);
    e->nreduced = pp_calloc((size_t)p, sizeof *e->nreduced);
    e->nstages_on = pp_calloc((size_t)p, sizeof *e->nstages_on);
    if (!e->seen || (timed && (!e->tok || !e->start || !e->end)) || (want_path && (!e->tok_src || !e->pred)) ||
        !e->pc ||
        !e->blocked || !e->clock || !e->clock_src || !e->stack || !e->wdone || !e->reduced || !e->reduce_end ||
        !e->reduce_src || !e->nreduced || !e->nstages_on) {
        engine_free(e);
        return pp_error_set(err, PP_ERR_NOMEM,
                            "schedule engine: out of memory for %d stages x %d microbatches",
                            S, s->microbatches);
    }
    for (int r = 0; r < p; r++) {
        e->blocked[r] = -1;
        e->reduce_src[r] = -1;
        e->clock_src[r] = -1;
    }
    for (int st = 0; st < S; st++) e->nstages_on[s->stage_rank[st]]++;
    e->fail_rank = -1;
    return PP_OK;
}

void engine_free(engine *e)
{
    free(e->offset);
    free(e->seen);
    free(e->tok);
    free(e->tok_src);
    free(e->start);
    free(e->end);
    free(e->pred);
    free(e->pc);
    free(e->blocked);
    free(e->clock);
    free(e->clock_src);
    free(e->stack);
    free(e->wdone);
    free(e->reduced);
    free(e->reduce_end);
    free(e->reduce_src);
    free(e->nreduced);
    free(e->nstages_on);
    memset(e, 0, sizeof *e);
}

static int tok_type(long t) { return (int)(t % TOK_COUNT); }
static int tok_stage(const engine *e, long t) { return (int)(t / TOK_COUNT / e->s->microbatches); }
static int tok_mb(const engine *e, long t) { return (int)(t / TOK_COUNT % e->s->microbatches); }

/* The rank whose actions produce token t. */
static int tok_rank(const engine *e, long t)
{
    int type = tok_type(t), st = tok_stage(e, t);
    if (type == TOK_ACT_MSG) st -= 1;
    if (type == TOK_GRAD_MSG) st += 1;
    return e->s->stage_rank[st];
}

/* A phrase naming what token t stands for. */
void engine_describe_token(const engine *e, long t, char *buf, size_t len)
{
    int st = tok_stage(e, t), mb = tok_mb(e, t), q = tok_rank(e, t);
    switch (tok_type(t)) {
    case TOK_FWD: snprintf(buf, len, "FORWARD of stage %d microbatch %d (rank %d)", st, mb, q); break;
    case TOK_BIN:
        snprintf(buf, len, "the input gradient (BACKWARD or BACKWARD_INPUT) of stage %d microbatch %d (rank %d)",
                 st, mb, q);
        break;
    case TOK_WGT: snprintf(buf, len, "the weight gradient of stage %d microbatch %d (rank %d)", st, mb, q); break;
    case TOK_ACT_MSG:
        snprintf(buf, len, "SEND_ACT of stage %d microbatch %d on rank %d", st - 1, mb, q);
        break;
    case TOK_GRAD_MSG:
        snprintf(buf, len, "SEND_GRAD of stage %d microbatch %d on rank %d", st + 1, mb, q);
        break;
    case TOK_ACT_POST:
        snprintf(buf, len, "rank %d to post RECV_ACT of stage %d microbatch %d", q, st, mb);
        break;
    case TOK_GRAD_POST:
        snprintf(buf, len, "rank %d to post RECV_GRAD of stage %d microbatch %d", q, st, mb);
        break;
    case TOK_ACT_IN:
        snprintf(buf, len, "the activation of stage %d microbatch %d, received by a RECV_ACT (rank %d)", st,
                 mb, q);
        break;
    default:
        snprintf(buf, len, "the output gradient of stage %d microbatch %d, received by a RECV_GRAD (rank %d)",
                 st, mb, q);
        break;
    }
}

static pp_status fail_at(engine *e, int r, pp_error *err, const char *what)
{
    char a[48];
    e->fail_rank = r;
    const pp_action *act = &e->s->actions[r][e->pc[r]];
    return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d action %d (%s): %s", r, e->pc[r],
                        pp_action_format(act, a, sizeof a), what);
}

/* Field checks: ranges, stage -> rank, peers, kinds allowed in this mode. */
static pp_status check_fields(engine *e, pp_error *err)
{
    const pp_schedule *s = e->s;
    int S = s->num_stages, m = s->microbatches;
    char msg[160];
    for (int r = 0; r < s->pp; r++) {
        for (int i = 0; i < s->count[r]; i++) {
            const pp_action *a = &s->actions[r][i];
            int k = a->kind, st = a->stage, want_peer = -1, lo = 0, hi = S - 1;
            e->pc[r] = i;
            msg[0] = 0;
            if (k < 0 || k >= PP_ACT_KIND_COUNT) {
                snprintf(msg, sizeof msg, "unknown action kind %d", k);
                return fail_at(e, r, err, msg);
            }
            if (!s->lowered && !action_is_compute(k))
                return fail_at(e, r, err, "a compute-only schedule holds only FORWARD/BACKWARD actions");
            if (k == PP_ACT_OPTIMIZER_STEP) {
                if (st != -1 || a->microbatch != -1 || a->peer != -1)
                    return fail_at(e, r, err, "OPTIMIZER_STEP takes stage -1, microbatch -1, peer -1");
                if (i != s->count[r] - 1) return fail_at(e, r, err, "OPTIMIZER_STEP must be the rank's last action");
                continue;
            }
            if (k == PP_ACT_SEND_ACT || k == PP_ACT_RECV_GRAD) hi = S - 2;
            if (k == PP_ACT_RECV_ACT || k == PP_ACT_SEND_GRAD) lo = 1;
            if (st < lo || st > hi) {
                snprintf(msg, sizeof msg, "stage %d out of range (%d..%d)", st, lo, hi);
                return fail_at(e, r, err, msg);
            }
            if (k == PP_ACT_REDUCE_GRADS ? a->microbatch != -1 : (a->microbatch < 0 || a->microbatch >= m)) {
                snprintf(msg, sizeof msg, "microbatch %d out of range (%s)", a->microbatch,
                         k == PP_ACT_REDUCE_GRADS ? "REDUCE_GRADS takes -1" : "0..microbatches-1");
                return fail_at(e, r, err, msg);
            }
            if (s->stage_rank[st] != r) {
                snprintf(msg, sizeof msg, "stage %d lives on rank %d, not on this rank", st, s->stage_rank[st]);
                return fail_at(e, r, err, msg);
            }
            if (k == PP_ACT_SEND_ACT || k == PP_ACT_RECV_GRAD) want_peer = s->stage_rank[st + 1];
            if (k == PP_ACT_RECV_ACT || k == PP_ACT_SEND_GRAD) want_peer = s->stage_rank[st - 1];
            if (action_is_comm(k) && want_peer == r)
                return fail_at(e, r, err, "stages on the same rank exchange data without SEND/RECV");
            if (a->peer != want_peer) {
                snprintf(msg, sizeof msg, "peer is %d, expected %d", a->peer, want_peer);
                return fail_at(e, r, err, msg);
            }
        }
        if (s->lowered && (s->count[r] == 0 || s->actions[r][s->count[r] - 1].kind != PP_ACT_OPTIMIZER_STEP)) {
            e->pc[r] = s->count[r];
            e->fail_rank = r;
            return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: the last action must be OPTIMIZER_STEP", r);
        }
        e->pc[r] = 0;
    }
    return PP_OK;
}

/* Records token t (of stage st) at time `when`, produced by global action g on rank r,
 * and wakes the neighbouring rank waiting for it. */
static pp_status produce(engine *e, int r, long t, int st, double when, int g, pp_error *err)
{
    if (e->seen[t]) {
        char d[160], msg[220];
        engine_describe_token(e, t, d, sizeof d);
        snprintf(msg, sizeof msg, "happens twice: %s was already done", d);
        return fail_at(e, r, err, msg);
    }
    e->seen[t] = 1;
    if (e->tok) e->tok[t] = when;
    if (e->tok_src) e->tok_src[t] = g;
    if (e->nblocked == 0) return PP_OK;
    for (int d = -1; d <= 1; d++) {
        if (st + d < 0 || st + d >= e->s->num_stages) continue;
        int q = e->s->stage_rank[st + d];
        if (e->blocked[q] == t) {
            e->blocked[q] = -1;
            e->nblocked--;
            e->stack[e->nstack++] = q;
        }
    }
    return PP_OK;
}

/* The tokens action a on rank r waits for; returns how many (0..2). */
static int needs(const engine *e, int r, const pp_action *a, long out[2])
{
    const pp_schedule *s = e->s;
    int st = a->stage, mb = a->microbatch, n = 0, S = s->num_stages;
    int direct = e->mode == RUN_COMPUTE_ONLY;
    switch (a->kind) {
    case PP_ACT_FORWARD:
        if (st > 0)
            out[n++] = (direct || s->stage_rank[st - 1] == r) ? tok_id(e, TOK_FWD, st - 1, mb)
                                                                : tok_id(e, TOK_ACT_IN, st, mb);
        break;
    case PP_ACT_BACKWARD:
    case PP_ACT_BACKWARD_INPUT:
        out[n++] = tok_id(e, TOK_FWD, st, mb);
        if (st < S - 1)
            out[n++] = (direct || s->stage_rank[st + 1] == r) ? tok_id(e, TOK_BIN, st + 1, mb)
                                                                : tok_id(e, TOK_GRAD_IN, st, mb);
        break;
    case PP_ACT_BACKWARD_WEIGHT: out[n++] = tok_id(e, TOK_BIN, st, mb); break;
    case PP_ACT_SEND_ACT:
        out[n++] = tok_id(e, TOK_FWD, st, mb);
        if (e->mode == RUN_RENDEZVOUS) out[n++] = tok_id(e, TOK_ACT_POST, st + 1, mb);
        break;
    case PP_ACT_SEND_GRAD:
        out[n++] = tok_id(e, TOK_BIN, st, mb);
        if (e->mode == RUN_RENDEZVOUS) out[n++] = tok_id(e, TOK_GRAD_POST, st - 1, mb);
        break;
    case PP_ACT_RECV_ACT: out[n++] = tok_id(e, TOK_ACT_MSG, st, mb); break;
    case PP_ACT_RECV_GRAD: out[n++] = tok_id(e, TOK_GRAD_MSG, st, mb); break;
    default: break;
    }
    return n;
}

/* Checks REDUCE_GRADS / OPTIMIZER_STEP preconditions (all local). */
static pp_status check_step(engine *e, int r, const pp_action *a, pp_error *err)
{
    char msg[160];
    if (a->kind == PP_ACT_REDUCE_GRADS) {
        if (e->reduced[a->stage]) return fail_at(e, r, err, "a second REDUCE_GRADS for this stage");
        if (e->wdone[a->stage] != e->s->microbatches) {
            snprintf(msg, sizeof msg, "comes before the stage's last backward (%d of %d microbatches done)",
                     e->wdone[a->stage], e->s->microbatches);
            return fail_at(e, r, err, msg);
        }
    }
    if (a->kind == PP_ACT_OPTIMIZER_STEP && e->nreduced[r] != e->nstages_on[r]) {
        snprintf(msg, sizeof msg, "comes before REDUCE_GRADS of all this rank's stages (%d of %d)",
                 e->nreduced[r], e->nstages_on[r]);
        return fail_at(e, r, err, msg);
    }
    return PP_OK;
}

/* Runs rank r until it finishes or waits for a token another rank produces. */
static pp_status step_rank(engine *e, int r, pp_error *err)
{
    const pp_schedule *s = e->s;
    while (e->pc[r] < s->count[r]) {
        int i = e->pc[r], g = e->offset[r] + i, st = (int)s->actions[r][i].stage;
        const pp_action *a = &s->actions[r][i];
        double t0 = e->clock[r];
        int pred = e->clock_src[r];
        if (a->kind == PP_ACT_RECV_ACT || a->kind == PP_ACT_RECV_GRAD) {
            long post = tok_id(e, a->kind == PP_ACT_RECV_ACT ? TOK_ACT_POST : TOK_GRAD_POST, st, a->microbatch);
            if (!e->seen[post]) PP_CHECK(produce(e, r, post, st, t0, g, err));
        }
        long need[2];
        int n = needs(e, r, a, need);
        for (int k = 0; k < n; k++) {
            if (!e->seen[need[k]]) {
                if (tok_rank(e, need[k]) == r) {
                    char d[160], msg[280];
                    engine_describe_token(e, need[k], d, sizeof d);
                    snprintf(msg, sizeof msg, "comes too early: it needs %s, which this rank has not done before it", d);
                    return fail_at(e, r, err, msg);
                }
                e->blocked[r] = need[k];
                e->nblocked++;
                return PP_OK;
            }
            double tt = e->tok ? e->tok[need[k]] : 0;
            if (tt >= t0 && tt > 0) {
                t0 = tt;
                pred = e->tok_src ? e->tok_src[need[k]] : -1;
            }
        }
        PP_CHECK(check_step(e, r, a, err));
        double cost = action_cost(e->costs, a, g), end = t0 + cost;
        int mb = a->microbatch;
        switch (a->kind) {
        case PP_ACT_FORWARD: PP_CHECK(produce(e, r, tok_id(e, TOK_FWD, st, mb), st, end, g, err)); break;
        case PP_ACT_BACKWARD:
            PP_CHECK(produce(e, r, tok_id(e, TOK_BIN, st, mb), st, end, g, err));
            PP_CHECK(produce(e, r, tok_id(e, TOK_WGT, st, mb), st, end, g, err));
            e->wdone[st]++;
            break;
        case PP_ACT_BACKWARD_INPUT: PP_CHECK(produce(e, r, tok_id(e, TOK_BIN, st, mb), st, end, g, err)); break;
        case PP_ACT_BACKWARD_WEIGHT:
            PP_CHECK(produce(e, r, tok_id(e, TOK_WGT, st, mb), st, end, g, err));
            e->wdone[st]++;
            break;
        case PP_ACT_SEND_ACT:
            end = t0 + transfer_time(e->costs, st);
            PP_CHECK(produce(e, r, tok_id(e, TOK_ACT_MSG, st + 1, mb), st + 1, end, g, err));
            break;
        case PP_ACT_SEND_GRAD:
            end = t0 + transfer_time(e->costs, st - 1);
            PP_CHECK(produce(e, r, tok_id(e, TOK_GRAD_MSG, st - 1, mb), st - 1, end, g, err));
            break;
        case PP_ACT_RECV_ACT: PP_CHECK(produce(e, r, tok_id(e, TOK_ACT_IN, st, mb), st, end, g, err)); break;
        case PP_ACT_RECV_GRAD: PP_CHECK(produce(e, r, tok_id(e, TOK_GRAD_IN, st, mb), st, end, g, err)); break;
        case PP_ACT_REDUCE_GRADS:
            end = t0 + (e->costs ? e->costs->allreduce + stage_cost(e->costs, st)->allreduce : 0);
            e->reduced[st] = 1;
            e->nreduced[r]++;
            if (end >= e->reduce_end[r]) {
                e->reduce_end[r] = end;
                e->reduce_src[r] = g;
            }
            break;
        default: /* OPTIMIZER_STEP */
            if (e->reduce_end[r] > t0) {
                t0 = e->reduce_end[r];
                pred = e->reduce_src[r];
                end = t0 + cost;
            }
            break;
        }
        /* A receive is posted when reached and spans the wait for its data. SEND, RECV
         * and REDUCE_GRADS run beside compute: the stream is free once they are issued,
         * and the compute that uses received data waits for it (RECV's token). */
        int beside = !action_is_compute(a->kind) && a->kind != PP_ACT_OPTIMIZER_STEP;
        int recv = a->kind == PP_ACT_RECV_ACT || a->kind == PP_ACT_RECV_GRAD;
        if (e->start) {
            e->start[g] = recv ? e->clock[r] : t0;
            e->end[g] = end;
        }
        if (e->pred) e->pred[g] = pred;
        if (!recv) {
            double now = beside ? t0 : end;
            if (now != e->clock[r] || !beside) e->clock_src[r] = beside ? pred : g;
            e->clock[r] = now;
        }
        e->pc[r] = i + 1;
    }
    return PP_OK;
}

pp_status engine_run(engine *e, pp_error *err)
{
    const pp_schedule *s = e->s;
    PP_CHECK(check_fields(e, err));
    for (int r = s->pp - 1; r >= 0; r--) e->stack[e->nstack++] = r;
    while (e->nstack > 0) PP_CHECK(step_rank(e, e->stack[--e->nstack], err));
    int stuck = 0, first = -1;
    for (int r = 0; r < s->pp; r++)
        if (e->pc[r] < s->count[r]) {
            stuck++;
            if (first < 0) first = r;
        }
    if (!stuck) return PP_OK;
    char a[48], d[160];
    e->fail_rank = first;
    engine_describe_token(e, e->blocked[first], d, sizeof d);
    return pp_error_set(err, PP_ERR_DEADLOCK,
                        "deadlock: %d rank(s) wait on each other forever; rank %d is stuck at action %d (%s) "
                        "waiting for %s",
                        stuck, first, e->pc[first],
                        pp_action_format(&s->actions[first][e->pc[first]], a, sizeof a), d);
}

pp_status engine_check_complete(const engine *e, pp_error *err)
{
    const pp_schedule *s = e->s;
    static const char *what[] = {"forwarded", "backwarded (input gradient)", "backwarded (weight gradient)"};
    for (int st = 0; st < s->num_stages; st++)
        for (int mb = 0; mb < s->microbatches; mb++)
            for (int type = TOK_FWD; type <= TOK_WGT; type++)
                if (!e->seen[tok_id(e, type, st, mb)])
                    return pp_error_set(err, PP_ERR_INVALID_ARG,
                                        "stage %d (rank %d) microbatch %d is never %s", st,
                                        s->stage_rank[st], mb, what[type]);
    if (s->lowered)
        for (int st = 0; st < s->num_stages; st++)
            if (!e->reduced[st])
                return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d (rank %d) has no REDUCE_GRADS", st,
                                    s->stage_rank[st]);
    return PP_OK;
}
