/* The cost model: per node, the trainable parameters it is first to read, forward
 * FLOPs per microbatch (the op registry's FLOP model) and the bytes of its outputs (all
 * from the finalized shapes). */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

int64_t value_bytes(const pp_graph *g, int v)
{
    int64_t n = pp_shape_numel(&g->values[v].shape);
    size_t es = pp_dtype_size(g->values[v].dtype);
    return n < 0 || !es ? -1 : n * (int64_t)es;
}

int64_t value_bytes_per_sample(const pp_graph *g, int v)
{
    const pp_shape *s = &g->values[v].shape;
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->dims[d] >= 0 ? s->dims[d] : 1;
    size_t es = pp_dtype_size(g->values[v].dtype);
    return n * (int64_t)(es ? es : 4);
}

/* Forward FLOPs of one node by the registry's cost rule (graph/ops.c: pp_op_flops), -1
 * when a shape it needs is unknown; *over set when they do not fit in int64. */
static int64_t node_flops(const pp_graph *g, const pp_node *n, int *over)
{
    const pp_shape *in[PP_OP_MAX_INPUTS] = {NULL};
    int nin = n->ninputs < PP_OP_MAX_INPUTS ? n->ninputs : PP_OP_MAX_INPUTS;
    for (int k = 0; k < nin; k++) in[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]].shape : NULL;
    const pp_shape *out = n->noutputs && n->outputs[0] >= 0 ? &g->values[n->outputs[0]].shape : NULL;
    return pp_op_flops(n->op, n->attrs, n->nattrs, in, nin, out, over);
}

/* The model's totals may reach these (64 PiB, 4.6e18 FLOPs) and no more: every sum the
 * partitioner makes of a subset of nodes (a stage, the bound, a cut) then fits, with
 * room for the x4 of parameter memory. One tensor is at most PP_MAX_TENSOR_BYTES
 * (checked when the graph was finalized), but a model may hold very many. */
#define TOTAL_BYTES_MAX ((int64_t)1 << 56)
#define TOTAL_FLOPS_MAX ((int64_t)1 << 62)

/* Adds node i's costs to the running totals t[4] = {params, param bytes, FLOPs, act bytes};
 * an error naming the node when a total leaves its bound. The act total counts outputs
 * of unknown size by their bytes per sample, as the cut tie-break does. */
static pp_status add_totals(const pp_graph *g, int i, const pp_node_cost *c, int flops_over, int64_t *t,
                            pp_error *err)
{
    static const char *const what[4] = {"parameters", "parameter bytes", "forward FLOPs", "activation bytes"};
    const pp_node *n = &g->nodes[i];
    int64_t act = 0;
    for (int k = 0; k < n->noutputs; k++)
        if (n->outputs[k] >= 0) act += value_bytes_per_sample(g, n->outputs[k]);   /* each <= 4 x 2^47 */
    const int64_t x[4] = {c->params, c->param_bytes, c->flops, c->act_bytes >= 0 ? c->act_bytes : act};
    const int64_t max[4] = {TOTAL_BYTES_MAX, TOTAL_BYTES_MAX, TOTAL_FLOPS_MAX, TOTAL_BYTES_MAX};
    for (int k = 0; k < 4; k++) {
        int over = k == 2 && flops_over;
        if (!over && x[k] > 0) over = __builtin_add_overflow(t[k], x[k], &t[k]) || t[k] > max[k];
        if (!over) continue;
        char sb[256];
        const pp_shape *os = n->noutputs && n->outputs[0] >= 0 ? &g->values[n->outputs[0]].shape : NULL;
        return pp_error_set(err, PP_ERR_SHAPE,
                            "node '%s' (%s, output %s): the model's %s per microbatch pass %.3g, more than "
                            "onnxpipe can count; are the model's dims (or --batch / --dim) right?",
                            n->name, n->op_type, os ? pp_shape_format(os, sb, sizeof sb) : "[]", what[k],
                            (double)max[k]);
    }
    return PP_OK;
}

pp_status pp_partition_costs(const pp_graph *g, pp_node_cost *costs, pp_error *err)
{
    if (!g->finalized)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "graph '%s' is not finalized (call pp_graph_finalize)",
                            g->name ? g->name : "");
    int64_t totals[4] = {0};
    pp_status st = PP_OK;
    unsigned char *seen = pp_calloc((size_t)g->nvalues + 1, 1);
    if (!seen) return pp_error_set(err, PP_ERR_NOMEM, "out of memory computing node costs");
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        pp_node_cost *c = &costs[i];
        memset(c, 0, sizeof *c);
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !g->values[v].is_param || seen[v]) continue;
            seen[v] = 1;
            c->params += pp_shape_numel(&g->values[v].shape);
            c->param_bytes += (int64_t)g->inits[g->values[v].init].t.nbytes;
        }
        int over = 0;
        c->flops = node_flops(g, n, &over);
        for (int k = 0; k < n->noutputs; k++) {
            int o = n->outputs[k];
            if (o < 0) continue;
            int64_t b = value_bytes(g, o);
            c->act_bytes = b < 0 || c->act_bytes < 0 ? -1 : c->act_bytes + b;
        }
        if ((st = add_totals(g, i, c, over, totals, err)) != PP_OK) break;
    }
    free(seen);
    return st;
}
