/* What the planner takes from the rest of onnxpipe for its winners: each layout's schedule
 * (generated, lowered and validated once per (kind, pp, microbatches, chunks)) and the
 * exact memory estimate, the stage planner's dry run on the graph bound to the layout's
 * microbatch (pp_driver_estimate: the bytes `onnxpipe train` would allocate per rank). */
#include "planner_internal.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/schedule_lib.h>

#include <stdlib.h>
#include <string.h>

struct plan_sched {
    int kind, pp, chunks;
    int64_t m;
    pp_schedule *s;
};

void plan_exact_free(plan_ctx *c)
{
    for (int i = 0; i < c->nscheds; i++) pp_schedule_destroy(c->scheds[i].s);
    free(c->scheds);
    c->scheds = NULL;
    c->nscheds = 0;
    for (int i = 0; i < c->ngraphs; i++) pp_graph_destroy(c->graphs[i].g);
    c->ngraphs = 0;
}

pp_status plan_schedule(plan_ctx *c, const plan_cand *x, const pp_schedule **out, pp_error *err)
{
    for (int i = 0; i < c->nscheds; i++) {
        const struct plan_sched *p = &c->scheds[i];
        if (p->kind == x->kind && p->pp == x->pp && p->chunks == x->chunks && p->m == x->m) {
            *out = p->s;
            return PP_OK;
        }
    }
    struct plan_sched *grown = pp_realloc_array(c->scheds, (size_t)c->nscheds + 1, sizeof *grown);
    if (!grown) return PP_NOMEM(err);
    c->scheds = grown;
    pp_schedule *s = NULL;
    PP_CHECK(pp_schedule_create((pp_schedule_kind)x->kind, x->pp, (int)x->m, x->chunks, &s, err));
    c->scheds[c->nscheds++] = (struct plan_sched){x->kind, x->pp, x->chunks, x->m, s};
    *out = s;
    return PP_OK;
}

/* The model bound to microbatch mb: a few are kept, the oldest replaced. */
static pp_status graph_at(plan_ctx *c, int64_t mb, const pp_graph **out, pp_error *err)
{
    for (int i = 0; i < c->ngraphs; i++)
        if (c->graphs[i].mb == mb) {
            *out = c->graphs[i].g;
            return PP_OK;
        }
    pp_graph_options go = c->model.gopt;
    go.batch = mb;
    pp_graph *g = NULL;
    PP_CHECK(pp_graph_load(c->model.path, &go, &g, err));
    int n = (int)(sizeof c->graphs / sizeof c->graphs[0]), slot;
    if (c->ngraphs < n) slot = c->ngraphs++;
    else {
        slot = c->graph_next;
        c->graph_next = (c->graph_next + 1) % n;
        pp_graph_destroy(c->graphs[slot].g);
    }
    c->graphs[slot].mb = mb;
    c->graphs[slot].g = g;
    *out = g;
    return PP_OK;
}

pp_status plan_exact_memory(plan_ctx *c, const plan_cand *x, int64_t *rank_bytes, int *exact, char *why,
                            size_t why_len, pp_error *err)
{
    const pp_plan_options *o = c->o;
    int64_t mb = o->batch / ((int64_t)x->dp * x->m);
    const pp_schedule *sch;
    const pp_graph *g;
    *exact = 0;
    why[0] = 0;
    PP_CHECK(plan_schedule(c, x, &sch, err));
    PP_CHECK(graph_at(c, mb, &g, err));
    pp_partition_options po = {.microbatches = x->m, .recompute = (pp_recompute)x->recompute};
    pp_partition *part = NULL;
    pp_driver_bytes *rk = pp_calloc((size_t)x->pp, sizeof *rk);
    pp_status st = rk ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK) st = pp_partition_create(g, sch->num_stages, &po, &part, err);
    if (st == PP_OK) {
        pp_stage_options so = o->stage;
        so.microbatch = mb;
        so.global_batch = o->batch;
        so.precision = (pp_dtype)x->prec;
        so.recompute = (pp_recompute)x->recompute;
        so.training = 1;
        pp_error why_err = {0};
        /* the plan's dp all-reduce is fp32 (--reduce-dtype is not a dimension of the search) */
        if (pp_driver_estimate(sch, part, o->device, &so, PP_DTYPE_F32, NULL, rk, &why_err) == PP_OK) {
            for (int r = 0; r < x->pp; r++) rank_bytes[r] = rk[r].total;
            *exact = 1;
        } else if (why_err.status == PP_ERR_NOMEM) {
            st = PP_NOMEM(err);
        } else {
            snprintf(why, why_len, "%s", why_err.msg);
        }
    }
    pp_partition_destroy(part);
    free(rk);
    return st;
}
