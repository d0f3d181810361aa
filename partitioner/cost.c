/* The cost model: per node, the trainable parameters it is first to read, forward
 * FLOPs per microbatch and the bytes of its outputs (all from the finalized shapes). */
#include "partition_internal.h"

#include <string.h>

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

static int64_t numel(const pp_graph *g, int v)
{
    return v < 0 ? -1 : pp_shape_numel(&g->values[v].shape);
}

static int is_op(const pp_node *n, const char *op) { return !strcmp(n->op_type, op); }

static const pp_shape *in_shape(const pp_graph *g, const pp_node *n, int k)
{
    return k < n->ninputs && n->inputs[k] >= 0 ? &g->values[n->inputs[k]].shape : NULL;
}

/* Ops that only move or index data: no arithmetic. */
static int is_data_movement(const pp_node *n)
{
    static const char *const ops[] = {
        "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Split", "Slice", "Concat",
        "Gather", "Expand", "Cast", "Constant", "ConstantOfShape", "Shape", "Range", "Identity",
        "Dropout", "Where", "Equal",
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (is_op(n, ops[i])) return 1;
    return 0;
}

/* FLOPs per output (or input) element of ops that are not products. */
static int64_t per_element(const pp_node *n)
{
    if (is_op(n, "Softmax") || is_op(n, "LogSoftmax")) return 5;   /* max, sub, exp, sum, div */
    if (is_op(n, "LayerNormalization")) return 8;                  /* mean, var, norm, scale, shift */
    if (is_op(n, "BatchNormalization")) return 4;
    if (is_op(n, "SoftmaxCrossEntropyLoss")) return 6;
    if (is_op(n, "Gelu") || is_op(n, "Erf") || is_op(n, "Tanh") || is_op(n, "Sigmoid")) return 4;
    return 1;
}

/* Forward FLOPs of one node, -1 when a shape it needs is unknown. */
static int64_t node_flops(const pp_graph *g, const pp_node *n)
{
    if (is_data_movement(n)) return 0;
    int out = n->noutputs ? n->outputs[0] : -1;
    int64_t oe = numel(g, out);
    if (oe < 0) return -1;
    if (is_op(n, "MatMul") || is_op(n, "Gemm")) {
        const pp_shape *a = in_shape(g, n, 0);
        if (!a || a->rank < 1 || a->dims[a->rank - 1] < 0) return -1;
        int64_t k = a->dims[a->rank - 1];
        if (is_op(n, "Gemm")) {
            int64_t ta = 0;
            const pp_attr *at = pp_attr_find(n->attrs, n->nattrs, "transA");
            if (at && at->type == PP_ATTR_INT) ta = at->i;
            if (a->rank != 2) return -1;
            k = a->dims[ta ? 0 : 1];
            return 2 * oe * k + (n->ninputs > 2 ? oe : 0);   /* + bias */
        }
        if (a->rank == 1) k = a->dims[0];
        return 2 * oe * k;
    }
    if (is_op(n, "Conv")) {
        const pp_shape *w = in_shape(g, n, 1);   /* (Cout, Cin/group, k...) */
        if (!w || w->rank < 2) return -1;
        int64_t per = 1;
        for (int d = 1; d < w->rank; d++) per *= w->dims[d];
        return 2 * oe * per + (n->ninputs > 2 ? oe : 0);
    }
    if (is_op(n, "MaxPool") || is_op(n, "AveragePool")) {
        const int64_t *ks;
        int nk = 0;
        const pp_attr *a = pp_attr_find(n->attrs, n->nattrs, "kernel_shape");
        ks = a && a->type == PP_ATTR_INTS ? a->ints : NULL;
        nk = ks ? a->n : 0;
        int64_t per = 1;
        for (int d = 0; d < nk; d++) per *= ks[d];
        return oe * per;
    }
    if (is_op(n, "GlobalAveragePool") || is_op(n, "ReduceMean") || is_op(n, "ReduceSum") ||
        is_op(n, "SoftmaxCrossEntropyLoss")) {
        int64_t ie = n->ninputs ? numel(g, n->inputs[0]) : -1;
        return ie < 0 ? -1 : ie * per_element(n);
    }
    return oe * per_element(n);
}

pp_status pp_partition_costs(const pp_graph *g, pp_node_cost *costs, pp_error *err)
{
    if (!g->finalized)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "graph '%s' is not finalized (call pp_graph_finalize)",
                            g->name ? g->name : "");
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
        c->flops = node_flops(g, n);
        for (int k = 0; k < n->noutputs; k++) {
            int o = n->outputs[k];
            if (o < 0) continue;
            int64_t b = value_bytes(g, o);
            c->act_bytes = b < 0 || c->act_bytes < 0 ? -1 : c->act_bytes + b;
        }
    }
    free(seen);
    return PP_OK;
}
