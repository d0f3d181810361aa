/* The balance as the solvers see it: a weight per node (and a second one for the memory
 * balance's stash), a coefficient per stage for each, and per activation what a cut through
 * it charges the stage it leaves (tail), the stage it enters (head) and the tie-break
 * (bytes). A stage's cost is then
 *   ca*sum(a) + cb*sum(b) + ct*tail(cut after it) + ch*head(cut before it) + fixed. */
#include "partition_internal.h"

#include <math.h>
#include <string.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define DEFAULT_GFLOPS 100.0

void balance_free(balance_model *m)
{
    free(m->a), free(m->b), free(m->ca), free(m->cb), free(m->ct), free(m->ch);
    free(m->vtail), free(m->vhead);
    memset(m, 0, sizeof *m);
}

/* An activation: produced by a node and read by a later one. */
static int is_activation(const pp_value *v)
{
    if (v->producer < 0) return 0;
    for (int c = 0; c < v->nconsumers; c++)
        if (v->consumers[c] != v->producer) return 1;
    return 0;
}

/* Seconds x rate as units, refused past 2^56 (the partitioner's totals stay below 2^62). */
static pp_status units(double x, const char *what, int64_t *out, pp_error *err)
{
    if (!(x >= 0) || x > (double)((int64_t)1 << 56))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the time balance's %s is %.3g FLOP-times, more than onnxpipe "
                            "can count; are --gflops and --link-gbps right?", what, x);
    *out = (int64_t)llround(x);
    return PP_OK;
}

/* Time: per node (3 + rerun) x FLOPs + overhead, sends at gflops / link_gbps FLOP-times per
 * byte; recompute runs the forward of the re-run nodes once more before backward. */
static pp_status time_model(const pp_partition *p, balance_model *m, pp_error *err)
{
    const pp_graph *g = p->graph;
    double overhead = p->op_overhead * p->gflops * 1e9;
    int64_t ov = 0;
    PP_CHECK(units(overhead, "per-node overhead", &ov, err));
    for (int i = 0; i < g->nnodes; i++) {
        int keep = p->recompute == PP_RECOMPUTE_SELECTIVE &&
                   (pp_op_get(g->nodes[i].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE);
        int64_t passes = 3 + (p->recompute != PP_RECOMPUTE_NONE && !keep), t;
        if (__builtin_mul_overflow(p->costs[i].flops, passes, &t) || __builtin_add_overflow(t, ov, &t))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s': the time balance's FLOP-times overflow",
                                g->nodes[i].name);
        m->a[i] = t;
    }
    if (p->link_gbps <= 0) return PP_OK;
    double per_byte = p->gflops / p->link_gbps;
    m->vtail = calloc((size_t)g->nvalues + 1, sizeof *m->vtail);
    m->vhead = calloc((size_t)g->nvalues + 1, sizeof *m->vhead);
    if (!m->vtail || !m->vhead) return PP_NOMEM(err);
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (!is_activation(val)) continue;
        double b = (double)value_bytes(g, v);
        PP_CHECK(units(b * per_byte, "send of one tensor", &m->vtail[v], err));
        if (pp_dtype_is_float(val->dtype)) m->vhead[v] = m->vtail[v];   /* its gradient comes back */
    }
    for (int s = 0; s < p->nstages; s++) m->ct[s] = m->ch[s] = 1;
    return PP_OK;
}

/* Memory: the profile's bytes; the stash part and the ports times the microbatches in
 * flight; every stage charged the largest scratch of the model (an upper bound of its own). */
static pp_status memory_model(const pp_partition *p, balance_model *m, pp_error *err)
{
    const pp_memory_profile *x = p->memory;
    int64_t fwd = 0, bwd = 0, work = 0;
    for (int i = 0; i < p->graph->nnodes; i++) {
        m->a[i] = (2 + x->optimizer_states) * x->param_bytes[i] + x->param_copy * x->param_elems[i] +
                  x->const_bytes[i] + x->arena_bytes[i];
        m->b[i] = x->slot_bytes[i];
        if (x->fwd_live[i] > fwd) fwd = x->fwd_live[i];
        if (x->bwd_live[i] > bwd) bwd = x->bwd_live[i];
        if (x->work_bytes[i] > work) work = x->work_bytes[i];
    }
    m->fixed = fwd + bwd + work;
    size_t nv = (size_t)p->graph->nvalues;
    m->vtail = malloc((nv + 1) * sizeof *m->vtail);
    m->vhead = malloc((nv + 1) * sizeof *m->vhead);
    if (!m->vtail || !m->vhead) return PP_NOMEM(err);
    memcpy(m->vtail, x->port_out, nv * sizeof *m->vtail);
    memcpy(m->vhead, x->port_in, nv * sizeof *m->vhead);
    for (int s = 0; s < p->nstages; s++) {
        m->ca[s] = 1;
        m->cb[s] = m->ct[s] = m->ch[s] = partition_inflight(p->nstages, s, p->microbatches);
    }
    return PP_OK;
}

pp_status balance_make(const pp_partition *p, balance_model *m, pp_error *err)
{
    const pp_graph *g = p->graph;
    int n = g->nnodes, P = p->nstages, mem = p->balance == PP_BALANCE_MEMORY;
    memset(m, 0, sizeof *m);
    m->a = calloc((size_t)n + 1, sizeof *m->a);
    m->b = mem ? calloc((size_t)n + 1, sizeof *m->b) : NULL;
    m->ca = calloc((size_t)P, sizeof *m->ca), m->cb = calloc((size_t)P, sizeof *m->cb);
    m->ct = calloc((size_t)P, sizeof *m->ct), m->ch = calloc((size_t)P, sizeof *m->ch);
    if (!m->a || (mem && !m->b) || !m->ca || !m->cb || !m->ct || !m->ch) return PP_NOMEM(err);
    int needs = p->balance == PP_BALANCE_FLOPS || p->balance == PP_BALANCE_TIME || mem;
    for (int i = 0; needs && i < n; i++) {
        const pp_node_cost *c = &p->costs[i];
        if ((p->balance != PP_BALANCE_MEMORY && c->flops < 0) || (mem && c->act_bytes < 0))
            return pp_error_set(err, PP_ERR_SHAPE,
                                "the %s balance needs known shapes, but node '%s' (%s) has an unknown %s; "
                                "bind the batch and symbolic dims (--batch, --dim NAME=V)",
                                pp_balance_name(p->balance), g->nodes[i].name, g->nodes[i].op_type,
                                mem ? "output size" : "FLOP count");
    }
    for (int s = 0; s < P; s++) m->ca[s] = 1;
    switch (p->balance) {
    case PP_BALANCE_PARAMS:
        for (int i = 0; i < n; i++) m->a[i] = p->costs[i].params;
        break;
    case PP_BALANCE_FLOPS:
        for (int i = 0; i < n; i++) m->a[i] = p->costs[i].flops;
        break;
    case PP_BALANCE_UNIFORM:
        for (int i = 0; i < n; i++) m->a[i] = 1;
        break;
    case PP_BALANCE_TIME:
        return time_model(p, m, err);
    case PP_BALANCE_MEMORY:
        return memory_model(p, m, err);
    }
    return PP_OK;
}

int64_t balance_cut_bytes(const pp_graph *g, int v)
{
    int64_t b = value_bytes(g, v);
    return b >= 0 ? b : value_bytes_per_sample(g, v);
}

int64_t balance_stage_costs(const pp_partition *p, const balance_model *m, const int *ends, int64_t *costs)
{
    const pp_graph *g = p->graph;
    int P = p->nstages;
    int64_t worst = 0;
    int *stage = malloc(((size_t)g->nnodes + 1) * sizeof *stage);
    int64_t *tail = calloc((size_t)P + 1, sizeof *tail), *head = calloc((size_t)P + 1, sizeof *head);
    if (!stage || !tail || !head) {   /* only the reported weights are lost */
        free(stage), free(tail), free(head);
        for (int s = 0; s < P; s++) costs[s] = 0;
        return 0;
    }
    for (int s = 0, k = 0; s < P; s++)
        for (; k <= ends[s]; k++) stage[p->order[k]] = s;
    /* a value crossing boundaries b = from .. to-1 is sent by stages from .. to-1 and received
       by from+1 .. to (relayed) */
    for (int v = 0; (m->vtail || m->vhead) && v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->producer < 0) continue;
        int from = stage[val->producer], to = from;
        for (int c = 0; c < val->nconsumers; c++)
            if (stage[val->consumers[c]] > to) to = stage[val->consumers[c]];
        for (int s = from; s < to; s++) {
            if (m->vtail) tail[s] += m->vtail[v];
            if (m->vhead) head[s + 1] += m->vhead[v];
        }
    }
    for (int s = 0, k = 0; s < P; s++) {
        int64_t sa = 0, sb = 0;
        for (; k <= ends[s]; k++) {
            sa += m->a[p->order[k]];
            if (m->b) sb += m->b[p->order[k]];
        }
        costs[s] = m->ca[s] * sa + m->cb[s] * sb + m->ct[s] * tail[s] + m->ch[s] * head[s] + m->fixed;
        if (costs[s] > worst) worst = costs[s];
    }
    free(stage), free(tail), free(head);
    return worst;
}
