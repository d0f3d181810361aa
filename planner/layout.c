/* One layout's costs: per stage forward, backward halves (recompute on the input half),
 * stash and sends at its microbatch and precision; where its ranks sit on hosts and so
 * which links its messages and all-reduces take; a lower bound on its simulated step; the
 * memory model's bytes per rank; and the simulation itself. */
#include "planner_internal.h"

#include <onnxpipe/comm.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/schedule_lib.h>

#include <stdlib.h>
#include <string.h>

static int grow(plan_eval *e, int S, int pp)
{
    if (S > e->S) {
        double **d[] = {&e->F, &e->Bi, &e->Bw, &e->stash, &e->arena, &e->send, &e->msg, &e->ar, &e->bw};
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
            double *g = pp_realloc_array(*d[k], (size_t)S, sizeof **d[k]);
            if (!g) return 0;
            *d[k] = g;
        }
        int *sr = pp_realloc_array(e->stage_rank, (size_t)S, sizeof *sr);
        if (!sr) return 0;
        e->stage_rank = sr;
        e->S = S;
        e->k1_S = e->k2_S = 0;   /* contents moved: recompute */
    }
    if (pp > e->pp) {
        double **d[] = {&e->busy, &e->mem, &e->params};
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
            double *g = pp_realloc_array(*d[k], (size_t)pp, sizeof **d[k]);
            if (!g) return 0;
            *d[k] = g;
        }
        e->pp = pp;
        e->k2_S = 0;
    }
    return 1;
}

/* The world rank of pipeline rank r in replica d, and its host (devices_per_host H). */
static int world_rank(int order, int pp, int dp, int r, int d)
{
    return order == PP_GRID_STAGE_MAJOR ? d * pp + r : r * dp + d;
}

/* Bytes between hosts per step under an order, as pp_placement_plan counts them: each
 * crossing pipeline boundary carries sends x microbatches each way, each ring link of a
 * stage's all-reduce 2 (dp-1)/dp of its parameter bytes. */
static double network_bytes(const plan_split *sp, const int *stage_rank, int pp, int dp, int H, int order,
                            double samples_per_replica)
{
    double bytes = 0;
    for (int s = 0; s + 1 < sp->S; s++) {
        int r1 = stage_rank[s], r2 = stage_rank[s + 1];
        if (r1 == r2) continue;
        for (int d = 0; d < dp; d++)
            if (world_rank(order, pp, dp, r1, d) / H != world_rank(order, pp, dp, r2, d) / H)
                bytes += 2 * sp->send1[s] * samples_per_replica;
    }
    if (dp > 1)
        for (int s = 0; s < sp->S; s++) {
            int r = stage_rank[s], links = 0;
            for (int d = 0; d < dp; d++)
                links += world_rank(order, pp, dp, r, d) / H != world_rank(order, pp, dp, r, (d + 1) % dp) / H;
            bytes += links * 2.0 * (dp - 1) / dp * sp->param_bytes[s];
        }
    return bytes;
}

/* Whether boundary s (between stage s and s+1) or stage s's ring crosses hosts in some replica. */
static int boundary_crosses(const int *stage_rank, int s, int pp, int dp, int H, int order)
{
    int r1 = stage_rank[s], r2 = stage_rank[s + 1];
    for (int d = 0; d < dp; d++)
        if (world_rank(order, pp, dp, r1, d) / H != world_rank(order, pp, dp, r2, d) / H) return 1;
    return 0;
}

static int ring_crosses(int r, int pp, int dp, int H, int order)
{
    return world_rank(order, pp, dp, r, 0) / H != world_rank(order, pp, dp, r, dp - 1) / H;
}

static int imin(int64_t a, int64_t b)
{
    return (int)(a < b ? a : b);
}

/* Microbatches in flight on stage s (pipeline rank r, chunk k of the rank's v) at the
 * schedule's peak: the closed forms of docs/partition.md's schedule table; interleaved's rank
 * total (Megatron's warm-up) spread evenly over its chunks. pp_driver_estimate counts
 * them from the actions instead. */
static int slots_of(int kind, int pp, int v, int64_t m, int r, int s)
{
    switch (kind) {
    case PP_SCHED_GPIPE: return (int)m;
    case PP_SCHED_INTERLEAVED: {
        int64_t total = 2 * (int64_t)(pp - 1 - r) + (int64_t)(v - 1) * pp + 1;
        if (total > v * m) total = v * m;
        return imin(m, (total + v - 1) / v);
    }
    case PP_SCHED_ZB_V: return s < pp ? imin(m, 2 * pp - 1 - r) : imin(m, r + 1);
    default: return imin(m, pp - r);   /* 1f1b, zb-h1 */
    }
}

/* key1: each stage's forward, backward halves, stash, recompute arena and sends. */
static void stage_arrays(plan_ctx *c, const plan_split *sp, const plan_times *t, int64_t mb, int prec, int rc)
{
    plan_eval *e = &c->ev;
    int S = sp->S;
    double scale = plan_act_scale((pp_dtype)prec), xm = (double)(mb - 1);
    for (int s = 0; s < S; s++) {
        int a = sp->first[s], b = sp->last[s] + 1;
        double f = t->pf[b] - t->pf[a], bw = t->pb[b] - t->pb[a];
        double rerun = rc == PP_RECOMPUTE_FULL ? f : rc == PP_RECOMPUTE_SELECTIVE ? t->psel[b] - t->psel[a] : 0;
        e->F[s] = f;
        e->Bi[s] = bw / 2 + rerun;
        e->Bw[s] = bw / 2;
        e->stash[s] = scale * (sp->stash1[rc][s] + (sp->stash2[rc][s] - sp->stash1[rc][s]) * xm);
        e->arena[s] = rc == PP_RECOMPUTE_NONE ? 0 : scale * (sp->arena1[s] + (sp->arena2[s] - sp->arena1[s]) * xm);
        e->send[s] = s + 1 < S ? scale * (sp->send1[s] + (sp->send2[s] - sp->send1[s]) * xm) : 0;
    }
    e->k1_S = S;
    e->k1_exact = c->exact_mode;
    e->k1_mb = mb;
    e->k1_prec = prec;
    e->k1_rc = rc;
}

/* key2: which rank holds each stage, the grid order the placement would choose (fewer bytes
 * between hosts), each boundary's link and each stage's all-reduce. */
static void link_arrays(plan_ctx *c, const plan_split *sp, int pp, int dp, int v, int zbv)
{
    const pp_plan_options *o = c->o;
    plan_eval *e = &c->ev;
    int S = sp->S;
    for (int s = 0; s < S; s++) e->stage_rank[s] = zbv ? (s < pp ? s : 2 * pp - 1 - s) : s % pp;
    int H = o->links.devices_per_host;
    int spread = H > 0 && pp * dp > H;
    e->order = PP_GRID_STAGE_MAJOR;
    if (spread) {
        double spr = (double)o->batch / dp;
        double a = network_bytes(sp, e->stage_rank, pp, dp, H, PP_GRID_STAGE_MAJOR, spr),
               b = network_bytes(sp, e->stage_rank, pp, dp, H, PP_GRID_REPLICA_MAJOR, spr);
        if (b < a) e->order = PP_GRID_REPLICA_MAJOR;
    }
    double ring = dp > 1 ? 2.0 * (dp - 1) / dp : 0;
    for (int r = 0; r < pp; r++) e->params[r] = 0;
    for (int s = 0; s < S; s++) {
        e->params[e->stage_rank[s]] += sp->params[s];
        e->bw[s] = 0;
        if (s + 1 < S && e->stage_rank[s] != e->stage_rank[s + 1])
            e->bw[s] = spread && boundary_crosses(e->stage_rank, s, pp, dp, H, e->order) ? c->net_bw : c->host_bw;
        e->ar[s] = 0;
        if (dp > 1) {
            double bwid = spread && ring_crosses(e->stage_rank[s], pp, dp, H, e->order) ? c->net_bw : c->host_bw;
            e->ar[s] = ring * sp->param_bytes[s] / bwid + 2.0 * (dp - 1) * c->lat;
        }
    }
    e->k2_S = S;
    e->k2_exact = c->exact_mode;
    e->k2_v = zbv ? -v : v;
    e->k2_pp = pp;
    e->k2_dp = dp;
}

pp_status plan_evaluate(plan_ctx *c, const plan_cand *x, double limit, pp_error *err)
{
    const pp_plan_options *o = c->o;
    plan_eval *e = &c->ev;
    int pp = x->pp, dp = x->dp, v = x->chunks, S = pp * v, zbv = x->kind == PP_SCHED_ZB_V;
    int64_t mb = o->batch / ((int64_t)dp * x->m);
    const plan_split *sp;
    PP_CHECK(plan_get_split(c, S, &sp, err));
    if (!grow(e, S, pp)) return PP_NOMEM(err);
    if (e->k1_S != S || e->k1_exact != c->exact_mode || e->k1_mb != mb || e->k1_prec != x->prec ||
        e->k1_rc != x->recompute) {
        const plan_times *t;
        PP_CHECK(plan_get_times(c, mb, (pp_dtype)x->prec, &t, err));
        stage_arrays(c, sp, t, mb, x->prec, x->recompute);
    }
    if (e->k2_S != S || e->k2_exact != c->exact_mode || e->k2_v != (zbv ? -v : v) || e->k2_pp != pp || e->k2_dp != dp)
        link_arrays(c, sp, pp, dp, v, zbv);
    int lowp = x->prec == PP_DTYPE_BF16 || x->prec == PP_DTYPE_F16;
    double fixed = 2 + c->opt_slots + (lowp ? 0.5 : 0), m = (double)x->m;
    e->opt_max = e->compute_max = e->ar_max = e->msg_max = e->peak_mem = 0;
    e->bound = 0;
    /* memory first: a layout that does not fit needs no bound */
    for (int r = 0; r < pp; r++) e->mem[r] = 0;
    for (int s = 0; s < S; s++) {
        int r = e->stage_rank[s];
        e->mem[r] += sp->param_bytes[s] * fixed + slots_of(x->kind, pp, v, x->m, r, s) * e->stash[s] + e->arena[s];
    }
    for (int r = 0; r < pp; r++)
        if (e->mem[r] > e->peak_mem) e->peak_mem = e->mem[r];
    if (limit > 0 && e->peak_mem > limit) return PP_OK;
    for (int r = 0; r < pp; r++) {
        e->busy[r] = 0;
        double opt = e->params[r] * c->opt_rate;
        if (opt > e->opt_max) e->opt_max = opt;
    }
    for (int s = 0; s < S; s++) {
        e->msg[s] = e->bw[s] > 0 ? c->lat + e->send[s] / e->bw[s] : 0;
        e->busy[e->stage_rank[s]] += m * (e->F[s] + e->Bi[s] + e->Bw[s]);
        if (e->ar[s] > e->ar_max) e->ar_max = e->ar[s];
        if (e->msg[s] > e->msg_max) e->msg_max = e->msg[s];
    }
    /* the bound: rank r starts once microbatch 0 has come down to its first stage (r), works
     * busy_r, and with one stage per rank ends with that stage's all-reduce, or (a full
     * backward) hands its last gradient down the stages below; then the optimizer step */
    double head = 0, tail = 0;
    int split = x->kind == PP_SCHED_ZB_H1 || zbv;
    for (int r = 0; r < pp; r++) {
        if (r > 0) {
            head += e->F[r - 1] + e->msg[r - 1];
            tail += e->Bi[r - 1] + e->Bw[r - 1] + e->msg[r - 1];
        }
        double end = v > 1 ? 0 : split ? e->ar[r] : (tail > e->ar[r] ? tail : e->ar[r]);
        double lb = head + e->busy[r] + end + e->opt_max;
        if (lb > e->bound) e->bound = lb;
        if (e->busy[r] > e->compute_max) e->compute_max = e->busy[r];
    }
    return PP_OK;
}

pp_status plan_simulate(plan_ctx *c, const plan_cand *x, double *step_s, double *bubble, pp_error *err)
{
    const pp_schedule *sch;
    PP_CHECK(plan_schedule(c, x, &sch, err));
    PP_CHECK(plan_evaluate(c, x, 0, err));
    plan_eval *e = &c->ev;
    int S = x->pp * x->chunks;
    pp_stage_cost *sc = pp_calloc((size_t)S, sizeof *sc);
    if (!sc) return PP_NOMEM(err);
    for (int s = 0; s < S; s++)
        sc[s] = (pp_stage_cost){.forward = e->F[s], .backward_input = e->Bi[s], .backward_weight = e->Bw[s],
                                .act_bytes = e->stash[s], .send_time = e->msg[s], .allreduce = e->ar[s]};
    pp_costs pc = {.stage = sc, .num_stages = S, .optimizer = e->opt_max};
    pp_sim_result *r = NULL;
    pp_status st = pp_schedule_simulate(sch, &pc, &r, err);
    if (st == PP_OK) {
        *step_s = r->makespan;
        *bubble = r->bubble;
    }
    pp_sim_result_destroy(r);
    free(sc);
    return st;
}
