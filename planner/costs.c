/* The cost model: seconds per unit of each op type's work at a (microbatch, precision),
 * from a calibration (interpolated in log(microbatch) between the sizes timed) or from flat
 * FLOP rates, and the per-stage simulator costs of a partition built on it. */
#include "planner_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/stage_lib.h>

#define DEFAULT_GFLOPS 100.0
#define OPT_FLOPS_PER_PARAM 12.0   /* an Adam-family update: a dozen FLOPs and 16 bytes per parameter */

static double flat_gflops(const pp_cost_model *m, pp_dtype p)
{
    double g = m->gflops > 0 ? m->gflops : DEFAULT_GFLOPS;
    if ((p == PP_DTYPE_BF16 || p == PP_DTYPE_F16) && m->gflops_lowp > 0) g = m->gflops_lowp;
    return g;
}

double plan_optimizer_rate(const pp_cost_model *m)
{
    if (m->calibration) return m->calibration->optimizer_s_per_param;
    if (m->optimizer_s_per_param > 0) return m->optimizer_s_per_param;
    return OPT_FLOPS_PER_PARAM / (flat_gflops(m, PP_DTYPE_F32) * 1e9);
}

static const calib_op *point_op(const calib_point *p, const char *type)
{
    for (int i = 0; i < p->nops; i++)
        if (!strcmp(p->ops[i].type, type)) return &p->ops[i];
    return NULL;
}

/* A point's rate for a type: its own, or the point's average over the op types of the
 * same unit (FLOPs, or bytes for ops without FLOPs) when the type was not timed. */
static type_rate point_rate(const calib_point *p, const char *type)
{
    const calib_op *o = point_op(p, type);
    int bytes_unit = o ? !(o->flops > 0) : 0;
    if (o && (bytes_unit ? o->bytes > 0 : o->flops > 0)) {
        double w = bytes_unit ? o->bytes : o->flops;
        return (type_rate){o->forward_s / w, o->backward_s / w, bytes_unit};
    }
    double f = 0, b = 0, w = 0;
    for (int i = 0; i < p->nops; i++) {
        const calib_op *x = &p->ops[i];
        if (bytes_unit ? x->flops > 0 : !(x->flops > 0)) continue;
        f += x->forward_s;
        b += x->backward_s;
        w += bytes_unit ? x->bytes : x->flops;
    }
    return w > 0 ? (type_rate){f / w, b / w, bytes_unit} : (type_rate){0, 0, bytes_unit};
}

pp_status plan_type_rates(const pp_cost_model *m, const char *const *types, int ntypes, int64_t microbatch,
                          pp_dtype precision, type_rate *out, int *fallback, pp_error *err)
{
    if (fallback) *fallback = 0;
    const pp_calibration *c = m->calibration;
    if (!c) {
        double sf = 1.0 / (flat_gflops(m, precision) * 1e9);
        for (int t = 0; t < ntypes; t++) out[t] = (type_rate){sf, 2 * sf, 0};
        return PP_OK;
    }
    if (precision == 0) precision = PP_DTYPE_F32;
    if (!pp_calibration_has_precision(c, precision) && c->npoints > 0) {   /* fp32's, else any */
        if (fallback) *fallback = 1;
        precision = pp_calibration_has_precision(c, PP_DTYPE_F32) ? PP_DTYPE_F32 : c->points[0].precision;
    }
    /* the points of this precision, ascending microbatch: the two around it */
    const calib_point *lo = NULL, *hi = NULL;
    for (int i = 0; i < c->npoints; i++) {
        const calib_point *p = &c->points[i];
        if (p->precision != precision) continue;
        if (p->microbatch <= microbatch) lo = p;
        if (p->microbatch >= microbatch && !hi) hi = p;
    }
    if (!lo) lo = hi;
    if (!hi) hi = lo;
    if (!lo)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the calibration of '%s' has no %s points",
                            c->model ? c->model : "?", pp_precision_name(precision));
    double x = lo->microbatch == hi->microbatch
                   ? 0
                   : (log((double)microbatch) - log((double)lo->microbatch)) /
                         (log((double)hi->microbatch) - log((double)lo->microbatch));
    for (int t = 0; t < ntypes; t++) {
        type_rate a = point_rate(lo, types[t]), b = point_rate(hi, types[t]);
        out[t] = (type_rate){a.forward + x * (b.forward - a.forward), a.backward + x * (b.backward - a.backward),
                             a.bytes_unit};
        if (b.bytes_unit != a.bytes_unit) out[t] = a;   /* a type timed differently at two sizes: the nearer */
    }
    return PP_OK;
}

/* The distinct op types of g's nodes (pointers into g) and each node's index among them. */
static pp_status node_types(const pp_graph *g, const char ***types, int *ntypes, int **type_of, pp_error *err)
{
    *types = pp_calloc((size_t)g->nnodes + 1, sizeof **types);
    *type_of = pp_calloc((size_t)g->nnodes + 1, sizeof **type_of);
    if (!*types || !*type_of) return PP_NOMEM(err);
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int t = 0;
        while (t < n && strcmp((*types)[t], g->nodes[i].op_type)) t++;
        if (t == n) (*types)[n++] = g->nodes[i].op_type;
        (*type_of)[i] = t;
    }
    *ntypes = n;
    return PP_OK;
}

pp_status pp_plan_stage_costs(const pp_partition *part, const pp_cost_model *model, int64_t microbatch,
                              pp_dtype precision, pp_recompute recompute, pp_stage_cost *costs, pp_error *err)
{
    const pp_graph *g = part->graph;
    const char **types = NULL;
    int ntypes = 0, *type_of = NULL;
    type_rate *rate = NULL;
    pp_status st = PP_OK;
    if (microbatch < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "microbatch %lld: expected >= 1", (long long)microbatch);
    PP_CHECK_GOTO(node_types(g, &types, &ntypes, &type_of, err), st, done);
    rate = pp_calloc((size_t)ntypes + 1, sizeof *rate);
    if (!rate) {
        st = PP_NOMEM(err);
        goto done;
    }
    PP_CHECK_GOTO(plan_type_rates(model, types, ntypes, microbatch, precision, rate, NULL, err), st, done);
    double scale = plan_act_scale(precision);
    for (int s = 0; s < part->nstages; s++) {
        const pp_stage_info *si = &part->stages[s];
        if (si->flops < 0 || si->act_bytes < 0 || si->send_bytes < 0) {
            st = pp_error_set(err, PP_ERR_SHAPE,
                              "'%s': stage %d has unknown FLOPs or activation sizes; bind the batch (and other "
                              "symbolic dims)", g->path ? g->path : g->name ? g->name : "model", s);
            goto done;
        }
        double f = 0, b = 0, rerun = 0;
        for (int i = si->first_node; i <= si->last_node; i++) {
            const pp_node_cost *nc = &part->costs[i];
            double fl = nc->flops > 0 ? (double)nc->flops : 0, by = nc->act_bytes > 0 ? (double)nc->act_bytes : 0;
            double nf = plan_node_forward(&rate[type_of[i]], fl, by);
            f += nf;
            b += plan_node_backward(&rate[type_of[i]], fl, by);
            int keep = recompute == PP_RECOMPUTE_SELECTIVE &&
                       (pp_op_get(g->nodes[i].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE);
            if (recompute != PP_RECOMPUTE_NONE && !keep) rerun += nf;
        }
        pp_recompute_estimate re = pp_partition_recompute_estimate(part, s, recompute);
        /* the backward's halves: input gradients and weight gradients, taken as equal; the
         * forward run again comes before the input half (the stash is not in flight) */
        costs[s] = (pp_stage_cost){
            .forward = f, .backward_input = b / 2 + rerun, .backward_weight = b / 2,
            .act_bytes = re.stash_bytes > 0 ? scale * (double)re.stash_bytes : 0,
            .send_bytes = scale * (double)si->send_bytes,
        };
    }
done:
    free(types);
    free(type_of);
    free(rate);
    return st;
}
