/* The memory model (pp_memory_profile): what a stage allocates to train, per node and per
 * value crossing a cut. The stage planner makes the real one (pp_stage_memory_profile);
 * without it the partitioner estimates one from the op registry here, following the
 * planner's rules without its fusions and kernel data. Also the per-stage figure
 * (pp_partition_stage_memory) and the recompute estimate. */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define ALIGN 64

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

pp_memory_profile *memory_profile_alloc(int nnodes, int nvalues)
{
    pp_memory_profile *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->nnodes = nnodes, m->nvalues = nvalues;
    size_t n = (size_t)nnodes + 1, v = (size_t)nvalues + 1;
    m->param_bytes = calloc(n, 8), m->param_elems = calloc(n, 8), m->const_bytes = calloc(n, 8);
    m->slot_bytes = calloc(n, 8), m->arena_bytes = calloc(n, 8), m->fwd_live = calloc(n, 8);
    m->bwd_live = calloc(n, 8), m->port_in = calloc(v, 8), m->port_out = calloc(v, 8);
    m->work_bytes = calloc(n, 8);
    if (!m->param_bytes || !m->param_elems || !m->const_bytes || !m->slot_bytes || !m->arena_bytes ||
        !m->fwd_live || !m->bwd_live || !m->port_in || !m->port_out || !m->work_bytes) {
        pp_memory_profile_destroy(m);
        return NULL;
    }
    return m;
}

pp_status pp_memory_profile_create(int nnodes, int nvalues, pp_memory_profile **out, pp_error *err)
{
    if (nnodes < 0 || nvalues < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "memory profile of %d nodes and %d values", nnodes, nvalues);
    return (*out = memory_profile_alloc(nnodes, nvalues)) ? PP_OK : PP_NOMEM(err);
}

void pp_memory_profile_destroy(pp_memory_profile *m)
{
    if (!m) return;
    free(m->param_bytes), free(m->param_elems), free(m->const_bytes), free(m->slot_bytes);
    free(m->arena_bytes), free(m->fwd_live), free(m->bwd_live), free(m->port_in), free(m->port_out);
    free(m->work_bytes);
    free(m);
}

pp_status memory_profile_copy(const pp_graph *g, const pp_memory_profile *m, pp_memory_profile **out, pp_error *err)
{
    *out = NULL;
    if (m->nnodes != g->nnodes || m->nvalues != g->nvalues)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the memory profile is of a graph with %d nodes and %d values, "
                            "not '%s' (%d and %d)", m->nnodes, m->nvalues, g->name, g->nnodes, g->nvalues);
    pp_memory_profile *c = memory_profile_alloc(m->nnodes, m->nvalues);
    if (!c) return PP_NOMEM(err);
    size_t n = (size_t)m->nnodes * 8, v = (size_t)m->nvalues * 8;
    memcpy(c->param_bytes, m->param_bytes, n), memcpy(c->param_elems, m->param_elems, n);
    memcpy(c->const_bytes, m->const_bytes, n), memcpy(c->slot_bytes, m->slot_bytes, n);
    memcpy(c->arena_bytes, m->arena_bytes, n), memcpy(c->fwd_live, m->fwd_live, n);
    memcpy(c->bwd_live, m->bwd_live, n), memcpy(c->port_in, m->port_in, v), memcpy(c->port_out, m->port_out, v);
    memcpy(c->work_bytes, m->work_bytes, n);
    c->optimizer_states = m->optimizer_states, c->param_copy = m->param_copy, c->planned = m->planned;
    for (int i = 0; i < m->nnodes; i++)
        if (c->param_bytes[i] < 0 || c->slot_bytes[i] < 0 || c->const_bytes[i] < 0 || c->arena_bytes[i] < 0) {
            pp_memory_profile_destroy(c);
            return pp_error_set(err, PP_ERR_INVALID_ARG, "memory profile: node %d has negative bytes", i);
        }
    *out = c;
    return PP_OK;
}

/* ---- the estimate from the op registry --------------------------------------- */

/* The value whose memory v uses: a view op's output is its activation input's (stage/places.c). */
static int base_of(const pp_graph *g, const int *base, int v)
{
    int p = g->values[v].producer;
    if (p < 0 || !(pp_op_get(g->nodes[p].op)->flags & PP_OPF_VIEW) || g->nodes[p].ninputs < 1) return v;
    int in = g->nodes[p].inputs[0];
    return in >= 0 && g->values[in].init < 0 ? base[in] : v;
}

/* The value whose gradient memory v's shares: that of its only reader's output when the
 * reader passes the gradient through (an Add of the output's shape, a PASS_GRAD op). */
static int grad_base(const pp_graph *g, int v, int depth)
{
    const pp_value *val = &g->values[v];
    if (depth > 64 || val->nconsumers != 1 || val->is_output) return v;
    const pp_node *c = &g->nodes[val->consumers[0]];
    if (c->noutputs < 1 || c->outputs[0] < 0) return v;
    const pp_value *y = &g->values[c->outputs[0]];
    int k = 0;
    while (k < c->ninputs && c->inputs[k] != v) k++;
    int pass = c->op == PP_OP_ADD ? pp_shape_equal(&val->shape, &y->shape)
                                  : k == 0 && (pp_op_get(c->op)->flags & PP_OPF_PASS_GRAD);
    return pass && y->dtype == val->dtype ? grad_base(g, c->outputs[0], depth + 1) : v;
}

pp_status memory_profile_estimate(const pp_graph *g, const pp_node_cost *costs, pp_recompute r,
                                  pp_memory_profile **out, pp_error *err)
{
    (void)costs;
    int n = g->nnodes, nv = g->nvalues;
    pp_memory_profile *m = memory_profile_alloc(n, nv);
    int *base = malloc(((size_t)nv + 1) * sizeof *base);
    char *req = calloc((size_t)nv + 1, 1), *kept = calloc((size_t)nv + 1, 1), *gkept = calloc((size_t)nv + 1, 1);
    char *keep_r = calloc((size_t)nv + 1, 1);
    int *seen = calloc((size_t)n + 1, sizeof *seen);
    pp_status st = PP_OK;
    if (!m || !base || !req || !kept || !gkept || !keep_r || !seen) {
        st = PP_NOMEM(err);
        goto done;
    }
    m->optimizer_states = 2;
    for (int v = 0; v < nv; v++) {
        base[v] = v;
        req[v] = g->values[v].is_param && pp_dtype_is_float(g->values[v].dtype);
    }
    for (int i = 0; i < n; i++) {
        const pp_node *nd = &g->nodes[i];
        const pp_op_info *info = pp_op_get(nd->op);
        int any = 0, weight = 0;
        for (int k = 0; k < nd->ninputs; k++) {
            int v = nd->inputs[k];
            if (v < 0 || !pp_op_input_differentiable(nd->op, k) || !req[v]) continue;
            any = 1;
            weight |= g->values[v].is_param;
        }
        for (int k = 0; k < nd->noutputs; k++) {
            int v = nd->outputs[k];
            if (v < 0) continue;
            base[v] = base_of(g, base, v);
            req[v] = any && pp_dtype_is_float(g->values[v].dtype);
        }
        /* what backward reads (ops running backward: a gradient flows in and out) */
        if (!any) continue;
        for (int k = 0; k < nd->ninputs; k++) {
            int v = nd->inputs[k];
            if (v >= 0 && g->values[v].init < 0 && (info->saves_in >> k & 1)) kept[base[v]] = 1;
        }
        for (int k = 0; k < nd->noutputs; k++) {
            int v = nd->outputs[k];
            if (v < 0) continue;
            if (info->saves_out >> k & 1) kept[base[v]] = 1;
            if (weight && req[v]) gkept[grad_base(g, v, 0)] = 1;   /* read again by the weight pass */
            if (info->flags & PP_OPF_KEEP_ON_RECOMPUTE) keep_r[v] = 1;
        }
    }
    for (int k = 0; k < g->noutputs; k++) kept[base[g->outputs[k]]] = 1;
    for (int v = 0; v < nv; v++) {
        const pp_value *val = &g->values[v];
        int64_t b = value_bytes(g, v);
        if (b < 0) b = value_bytes_per_sample(g, v);
        int64_t ab = align_up(b);
        if (val->init >= 0) {   /* parameters at every reader, constants at the first */
            int64_t numel = pp_shape_numel(&val->shape), padded = (numel + 15) / 16 * 16;
            for (int c = 0, first = 1; c < val->nconsumers; c++) {
                int i = val->consumers[c];
                if (seen[i] == v + 1) continue;   /* a node reading it twice */
                seen[i] = v + 1;
                if (val->is_param) m->param_bytes[i] += padded * 4, m->param_elems[i] += padded;
                else if (first) m->const_bytes[i] += align_up((int64_t)g->inits[val->init].t.nbytes);
                first = 0;
            }
            continue;
        }
        int owner = val->producer;
        if (owner < 0) {   /* a graph input: a port of the stages reading it, kept in their slot */
            owner = val->nconsumers ? val->consumers[0] : -1;
            for (int c = 1; c < val->nconsumers; c++)
                if (val->consumers[c] < owner) owner = val->consumers[c];
            if (owner >= 0) m->slot_bytes[owner] += ab;
            continue;
        }
        int slot = kept[v] && base[v] == v, rkeep = val->is_output || (r == PP_RECOMPUTE_SELECTIVE && keep_r[v]);
        if (slot && r != PP_RECOMPUTE_NONE && !rkeep) m->arena_bytes[owner] += ab;
        else if (slot) m->slot_bytes[owner] += ab;
        if (gkept[v]) m->slot_bytes[owner] += ab;
        if (!slot && base[v] == v) m->fwd_live[owner] += b;
        if (req[v]) m->bwd_live[owner] += 2 * b;
        m->port_in[v] = ab + (req[v] ? ab : 0);
        m->port_out[v] = (slot && (r == PP_RECOMPUTE_NONE || rkeep) ? 0 : ab) + (req[v] && !gkept[v] ? ab : 0);
    }
done:
    free(base), free(req), free(kept), free(gkept), free(keep_r), free(seen);
    if (st != PP_OK) {
        pp_memory_profile_destroy(m);
        m = NULL;
    }
    *out = m;
    return st;
}

/* ---- per stage ------------------------------------------------------------------ */

int partition_inflight(int nstages, int stage, int64_t microbatches)
{
    /* 1F1B keeps P - s microbatches between forward and backward at stage s; the driver's
       stages after the first also hold the next microbatch they have received (its RECV_ACT
       lands in a slot of its own before the backward that frees one) */
    int64_t k = nstages - stage + (stage > 0);
    return (int)(k < microbatches ? k : microbatches);
}

pp_recompute_estimate pp_partition_recompute_estimate(const pp_partition *p, int stage, pp_recompute r)
{
    pp_recompute_estimate e = {0};
    if (!p || stage < 0 || stage >= p->nstages) return e;
    const pp_stage_info *s = &p->stages[stage];
    if (r == PP_RECOMPUTE_NONE) {
        e.stash_bytes = s->act_bytes;
        return e;
    }
    e.arena_bytes = s->act_bytes;
    e.stash_bytes = s->send_bytes;
    for (int i = 0; i < s->ninputs; i++) e.stash_bytes = add_known(e.stash_bytes, value_bytes(p->graph, s->inputs[i]));
    for (int k = s->first_node; k <= s->last_node; k++) {
        int i = p->order[k];
        int keep = r == PP_RECOMPUTE_SELECTIVE && (pp_op_get(p->graph->nodes[i].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE);
        if (keep)
            e.stash_bytes = add_known(e.stash_bytes, p->costs[i].act_bytes);
        else
            e.flops = add_known(e.flops, p->costs[i].flops);
    }
    return e;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Parameters and constants the stage holds, each once however many of its nodes read it
 * (the planner's flat buffers). *pb, *pe: parameter bytes (padded to 16 elements) and elements. */
static int held(const pp_partition *p, int stage, int64_t *pb, int64_t *pe, int64_t *cb)
{
    const pp_graph *g = p->graph;
    const pp_stage_info *s = &p->stages[stage];
    *pb = *pe = *cb = 0;
    for (int k = 0; k < s->nparams_held; k++) {
        int64_t numel = pp_shape_numel(&g->values[s->params_held[k]].shape), padded = (numel + 15) / 16 * 16;
        *pb += 4 * padded, *pe += padded;
    }
    int n = 0;
    for (int k = s->first_node; k <= s->last_node; k++) n += g->nodes[p->order[k]].ninputs;
    int *seen = malloc(((size_t)n + 1) * sizeof *seen);
    if (!seen) return 0;
    n = 0;
    for (int k = s->first_node; k <= s->last_node; k++) {
        const pp_node *nd = &g->nodes[p->order[k]];
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            if (v >= 0 && g->values[v].init >= 0 && !g->values[v].is_param) seen[n++] = v;
        }
    }
    qsort(seen, (size_t)n, sizeof *seen, cmp_int);   /* each constant once */
    for (int k = 0; k < n; k++)
        if (!k || seen[k] != seen[k - 1]) *cb += align_up((int64_t)g->inits[g->values[seen[k]].init].t.nbytes);
    free(seen);
    return 1;
}

/* Without a memory model: parameters with grads and Adam's two moments, and every output
 * of the stage's nodes in each slot (an upper bound of what backward keeps). */
static pp_stage_memory coarse(const pp_partition *p, int stage, int64_t microbatches)
{
    pp_stage_memory x = {0};
    int64_t pb = 0, pe = 0, cb = 0;
    if (held(p, stage, &pb, &pe, &cb)) x.constant_bytes = cb;
    x.param_bytes = x.grad_bytes = pb;
    x.optimizer_bytes = 2 * pb;
    x.inflight = partition_inflight(p->nstages, stage, microbatches);
    pp_recompute_estimate r = pp_partition_recompute_estimate(p, stage, p->recompute);
    x.slot_bytes = r.stash_bytes;
    x.stash_bytes = r.stash_bytes < 0 ? -1 : sat_mul(r.stash_bytes, x.inflight);
    x.recompute_bytes = r.arena_bytes;
    x.total_bytes = sat_add(sat_add(4 * pb, cb), sat_add(x.stash_bytes < 0 ? 0 : x.stash_bytes,
                                                         r.arena_bytes < 0 ? 0 : r.arena_bytes));
    return x;
}

pp_stage_memory pp_partition_stage_memory(const pp_partition *p, int stage, int64_t microbatches)
{
    pp_stage_memory x = {0};
    if (!p || stage < 0 || stage >= p->nstages) return x;
    if (microbatches < 1) microbatches = p->microbatches;
    if (!p->memory) return coarse(p, stage, microbatches);
    const pp_memory_profile *m = p->memory;
    const pp_stage_info *s = &p->stages[stage];
    int64_t pb = 0, pe = 0, slot = 0, arena = 0, fwd = 0, bwd = 0, work = 0;
    for (int k = s->first_node; k <= s->last_node; k++) {
        int i = p->order[k];
        pb += m->param_bytes[i], pe += m->param_elems[i];
        x.constant_bytes += m->const_bytes[i];
        slot += m->slot_bytes[i], arena += m->arena_bytes[i];
        if (m->fwd_live[i] > fwd) fwd = m->fwd_live[i];
        if (m->bwd_live[i] > bwd) bwd = m->bwd_live[i];
        if (m->work_bytes[i] > work) work = m->work_bytes[i];
    }
    int64_t hb, he, hc;   /* what it holds, each initializer once (the balance counts per reader) */
    if (held(p, stage, &hb, &he, &hc)) pb = hb, pe = he, x.constant_bytes = hc;
    /* ports: what it receives (from every earlier stage, skips relayed) and sends on */
    for (int c = 0; c < p->ncuts; c++) {
        const pp_cut_tensor *t = &p->cuts[c];
        if (t->from_stage < stage && t->to_stage >= stage) slot += m->port_in[t->value];
        if (t->from_stage <= stage && t->to_stage > stage) slot += m->port_out[t->value];
    }
    x.param_bytes = x.grad_bytes = pb;
    x.optimizer_bytes = sat_mul(pb, m->optimizer_states);
    x.param_copy_bytes = sat_mul(pe, m->param_copy);
    x.inflight = partition_inflight(p->nstages, stage, microbatches);
    x.slot_bytes = slot;
    x.stash_bytes = p->shapes_known ? sat_mul(slot, x.inflight) : -1;
    x.recompute_bytes = p->shapes_known ? arena : -1;
    x.scratch_bytes = sat_add(sat_add(fwd, bwd), work);
    int64_t t = sat_add(sat_add(2 * pb, x.optimizer_bytes), sat_add(x.param_copy_bytes, x.constant_bytes));
    if (p->shapes_known) t = sat_add(t, sat_add(sat_add(x.stash_bytes, arena), x.scratch_bytes));
    x.total_bytes = t;
    return x;
}
