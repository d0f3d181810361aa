/* The memory profile of a graph (pp_stage_memory_profile): the whole graph placed as
 * one stage, and what that placement allocates attributed to nodes and to the values a cut may
 * cross, so that the partitioner's memory balance weighs what a stage really allocates
 * (fusions, views, what each backward reads, kernels' saved data, 16-bit storage,
 * recompute). */
#include "stage_build.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

#define ALIGN 64

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* The node an allocation of value v belongs to: its producer, a graph input's first reader,
 * and for the loss's own tensors (no value) the graph's last node. -1: an initializer. */
static int owner(const pp_graph *g, int v)
{
    if (v < 0) return g->nnodes - 1;
    const pp_value *val = &g->values[v];
    if (val->init >= 0) return -1;
    if (val->producer >= 0) return val->producer;
    int first = -1;
    for (int c = 0; c < val->nconsumers; c++)
        if (first < 0 || val->consumers[c] < first) first = val->consumers[c];
    return first;
}

/* Scratch live at each op: forward tensors of the forward arena over [def, last] op, and
 * gradients of the backward arena over their backward order, summed by difference arrays;
 * each node gets its op's (the loss op's goes to the last node), and the most its calls
 * allocate for themselves (stage_op.work_bytes). */
static pp_status scratch(const pp_stage *s, pp_memory_profile *m, pp_error *err)
{
    int n = s->nops;
    int64_t *f = calloc((size_t)n + 2, sizeof *f), *b = calloc((size_t)n + 2, sizeof *b);
    if (!f || !b) {
        free(f), free(b);
        return PP_NOMEM(err);
    }
    for (int t = 0; t < s->nt; t++) {
        const tslot *x = &s->t[t];
        if (x->view_of >= 0) continue;
        if (x->at.loc == LOC_FWD && x->def_op >= 0) {
            int end = x->last_op > x->def_op ? x->last_op : x->def_op;
            f[x->def_op] += (int64_t)x->nbytes, f[end + 1] -= (int64_t)x->nbytes;
        }
        if (x->grad.loc == LOC_BWD && x->grad_of < 0 && x->first_bw >= 0)
            b[x->first_bw] += (int64_t)x->nbytes, b[x->last_bw + 1] -= (int64_t)x->nbytes;
    }
    for (int o = 1; o <= n; o++) f[o] += f[o - 1], b[o] += b[o - 1];
    for (int o = 0; o < n; o++) {
        int node = s->ops[o].node >= 0 ? s->ops[o].node : s->g->nnodes - 1;
        int64_t bw = b[n - 1 - o];   /* op o runs backward (n-1-o)th */
        if (f[o] > m->fwd_live[node]) m->fwd_live[node] = f[o];
        if (bw > m->bwd_live[node]) m->bwd_live[node] = bw;
        if ((int64_t)s->ops[o].work_bytes > m->work_bytes[node]) m->work_bytes[node] = (int64_t)s->ops[o].work_bytes;
    }
    free(f), free(b);
    return PP_OK;
}

/* Parameters (padded as in the flat buffer) at every node reading them, constants at the
 * first; seen[nnodes] scratch (a node reading a value twice counts it once). */
static void persistent(const pp_stage *s, pp_memory_profile *m, int *seen)
{
    const pp_graph *g = s->g;
    for (int i = 0; i < g->nnodes; i++) seen[i] = -1;
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->init < 0) continue;
        int64_t numel = pp_shape_numel(&val->shape), padded = (numel + 15) / 16 * 16;
        for (int c = 0, first = 1; c < val->nconsumers; c++) {
            int i = val->consumers[c];
            if (seen[i] == v) continue;
            seen[i] = v;
            if (val->is_param) m->param_bytes[i] += padded * 4, m->param_elems[i] += padded;
            else if (first) m->const_bytes[i] += align_up((int64_t)g->inits[val->init].t.nbytes);
            first = 0;
        }
    }
}

pp_status pp_stage_memory_profile(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt,
                                  pp_memory_profile **out, pp_error *err)
{
    *out = NULL;
    if ((int)kind < 0 || kind >= PP_DEVICE_KIND_COUNT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "device kind %d out of range", (int)kind);
    if (!g->finalized) return pp_error_set(err, PP_ERR_INVALID_ARG, "the graph is not finalized");
    pp_stage_options o = *opt;
    o.slots = 1;
    pp_stage *s = NULL;
    pp_memory_profile *m = NULL;
    int *seen = malloc(((size_t)g->nnodes + 1) * sizeof *seen);
    pp_status st = seen ? stage_place_whole(g, kind, &o, &s, err) : PP_NOMEM(err);
    if (st == PP_OK) st = pp_memory_profile_create(g->nnodes, g->nvalues, &m, err);
    if (st != PP_OK) goto done;
    m->optimizer_states = s->optim_slots;
    m->planned = 1;
    persistent(s, m, seen);
    for (int t = 0; t < s->nt; t++) {
        const tslot *x = &s->t[t];
        if (x->master >= 0) m->param_copy = (int)pp_dtype_size(x->dtype);   /* a 16-bit copy exists */
        if (x->view_of >= 0 || x->at.loc == LOC_PARAM || x->at.loc == LOC_PARAM16 || x->at.loc == LOC_CONST) continue;
        int i = owner(g, x->value);
        if (i < 0) continue;
        int64_t a = align_up((int64_t)x->nbytes);
        if (x->at.loc == LOC_SLOT) m->slot_bytes[i] += a;
        if (x->at.loc == LOC_RECOMP) m->arena_bytes[i] += a;
        if (x->grad.loc == LOC_SLOT && x->grad_of < 0 && x->needs_grad) m->slot_bytes[i] += a;
    }
    for (int k = 0; k < s->nops; k++) {
        const stage_op *op = &s->ops[k];
        int i = op->node >= 0 ? op->node : g->nnodes - 1;
        if (op->aux_bytes && op->aux.loc == LOC_SLOT) m->slot_bytes[i] += align_up((int64_t)op->aux_bytes);
        if (op->aux_bytes && op->aux.loc == LOC_RECOMP) m->arena_bytes[i] += align_up((int64_t)op->aux_bytes);
    }
    /* ports: a stage receiving v keeps it and its gradient; one sending v keeps what the slot
       does not hold already (a view sent on is a tensor of its own) */
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].producer < 0) continue;
        int t = s->t_of_value[v];
        int64_t bytes = (int64_t)pp_shape_numel(&g->values[v].shape) * (int64_t)pp_dtype_size(g->values[v].dtype);
        int grad = pp_dtype_is_float(g->values[v].dtype), in_slot = 0, grad_in_slot = 0;
        if (t >= 0) {
            const tslot *x = &s->t[t];
            bytes = (int64_t)x->nbytes;
            grad = x->needs_grad || grad;
            in_slot = x->view_of < 0 && x->at.loc == LOC_SLOT;
            grad_in_slot = x->view_of < 0 && x->grad_of < 0 && x->grad.loc == LOC_SLOT;
        }
        int64_t a = align_up(bytes);
        m->port_in[v] = a + (grad ? a : 0);
        m->port_out[v] = (in_slot ? 0 : a) + (grad && !grad_in_slot ? a : 0);
    }
    st = scratch(s, m, err);
done:
    free(seen);
    pp_stage_destroy(s);
    if (st != PP_OK) {
        pp_memory_profile_destroy(m);
        m = NULL;
        pp_error_prefix(err, "memory profile of '%s': ", g->name);
    }
    *out = m;
    return st;
}
