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

/* How an op's FLOPs are counted. */
typedef enum { F_ELEMENTWISE, F_MOVE, F_MATMUL, F_GEMM, F_CONV, F_POOL, F_REDUCE } flop_kind;

typedef struct op_cost {
    const char *op;
    flop_kind kind;
    int64_t per;    /* FLOPs per output element (per input element for F_REDUCE) */
} op_cost;

/* Ops not listed are elementwise, one FLOP per output element. */
static const op_cost op_costs[] = {
    {"MatMul", F_MATMUL, 0}, {"Gemm", F_GEMM, 0}, {"Conv", F_CONV, 0},
    {"MaxPool", F_POOL, 0}, {"AveragePool", F_POOL, 0},
    {"GlobalAveragePool", F_REDUCE, 1}, {"ReduceMean", F_REDUCE, 1}, {"ReduceSum", F_REDUCE, 1},
    {"SoftmaxCrossEntropyLoss", F_REDUCE, 6},                        /* softmax + log + pick */
    {"Softmax", F_ELEMENTWISE, 5}, {"LogSoftmax", F_ELEMENTWISE, 5}, /* max, sub, exp, sum, div */
    {"LayerNormalization", F_ELEMENTWISE, 8},                        /* mean, var, norm, scale, shift */
    {"BatchNormalization", F_ELEMENTWISE, 4},
    {"Gelu", F_ELEMENTWISE, 4}, {"Erf", F_ELEMENTWISE, 4}, {"Tanh", F_ELEMENTWISE, 4},
    {"Sigmoid", F_ELEMENTWISE, 4},
    /* data movement and indexing: no arithmetic */
    {"Reshape", F_MOVE, 0}, {"Flatten", F_MOVE, 0}, {"Transpose", F_MOVE, 0}, {"Squeeze", F_MOVE, 0},
    {"Unsqueeze", F_MOVE, 0}, {"Split", F_MOVE, 0}, {"Slice", F_MOVE, 0}, {"Concat", F_MOVE, 0},
    {"Gather", F_MOVE, 0}, {"Expand", F_MOVE, 0}, {"Cast", F_MOVE, 0}, {"Constant", F_MOVE, 0},
    {"ConstantOfShape", F_MOVE, 0}, {"Shape", F_MOVE, 0}, {"Range", F_MOVE, 0}, {"Identity", F_MOVE, 0},
    {"Dropout", F_MOVE, 0}, {"Where", F_MOVE, 0}, {"Equal", F_MOVE, 0},
};

static op_cost find_cost(const char *op)
{
    for (size_t i = 0; i < sizeof op_costs / sizeof op_costs[0]; i++)
        if (op[0] == op_costs[i].op[0] && !strcmp(op, op_costs[i].op)) return op_costs[i];
    return (op_cost){op, F_ELEMENTWISE, 1};
}

static const pp_shape *in_shape(const pp_graph *g, const pp_node *n, int k)
{
    return k < n->ninputs && n->inputs[k] >= 0 ? &g->values[n->inputs[k]].shape : NULL;
}

static int64_t attr_int(const pp_node *n, const char *name)
{
    const pp_attr *a = pp_attr_find(n->attrs, n->nattrs, name);
    return a && a->type == PP_ATTR_INT ? a->i : 0;
}

/* find_cost remembered by the op type string's address (nodes share their op type
 * strings, so a large graph needs a few lookups). */
#define MEMO 16

static op_cost memo_cost(op_cost *memo, const char *op)
{
    op_cost *m = &memo[((uintptr_t)op >> 4) % MEMO];
    if (m->op != op) *m = find_cost(op);
    m->op = op;
    return *m;
}

/* a * b for counts >= 0; *over set when the product leaves int64 (a kernel size or a
 * contraction dim can be large where no single tensor is). */
static int64_t mul(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static int64_t add(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

/* Forward FLOPs of one node, -1 when a shape it needs is unknown; *over set when they
 * do not fit in int64. */
static int64_t node_flops(const pp_graph *g, const pp_node *n, op_cost *memo, int *over)
{
    op_cost oc = memo_cost(memo, n->op_type);
    if (oc.kind == F_MOVE) return 0;
    int64_t oe = numel(g, n->noutputs ? n->outputs[0] : -1);
    if (oe < 0) return -1;
    int64_t bias = n->ninputs > 2 && n->inputs[2] >= 0 ? oe : 0;
    const pp_shape *a = in_shape(g, n, 0), *w = in_shape(g, n, 1);
    switch (oc.kind) {
    case F_MATMUL:   /* [.., M, K] x [.., K, N]: 2*M*N*K per batch entry */
        if (!a || a->rank < 1 || a->dims[a->rank - 1] < 0) return -1;
        return mul(2 * oe, a->dims[a->rank - 1], over);
    case F_GEMM:     /* A [M, K] (or [K, M] with transA) */
        if (!a || a->rank != 2 || a->dims[0] < 0 || a->dims[1] < 0) return -1;
        return add(mul(2 * oe, a->dims[attr_int(n, "transA") ? 0 : 1], over), bias, over);
    case F_CONV: {   /* W [Cout, Cin/group, k...]: 2 * out * (Cin/group) * kernel */
        if (!w || w->rank < 2) return -1;
        int64_t per = 1;
        for (int d = 1; d < w->rank; d++) per *= w->dims[d];   /* a tensor's dims: fits */
        return add(mul(2 * oe, per, over), bias, over);
    }
    case F_POOL: {
        const pp_attr *k = pp_attr_find(n->attrs, n->nattrs, "kernel_shape");
        int64_t per = 1;
        for (int d = 0; k && k->type == PP_ATTR_INTS && d < k->n; d++) per = mul(per, k->ints[d], over);
        return mul(oe, per, over);
    }
    case F_REDUCE: {
        int64_t ie = n->ninputs ? numel(g, n->inputs[0]) : -1;
        return ie < 0 ? -1 : mul(ie, oc.per, over);
    }
    default:
        return mul(oe, oc.per, over);
    }
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
    op_cost memo[MEMO] = {{0}};
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
        c->flops = node_flops(g, n, memo, &over);
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
