/* Folded constants that repeat along their leading dims (an attention mask expanded over
 * the batch, [B, 1, T, T] with B equal slices) are kept once: such a dim becomes 1 wherever
 * every reader is a broadcasting elementwise op whose other operands have that dim, so no
 * output changes. The stage then sees attention's mask as the [1, 1, T, T] bias of the
 * scores' MatMul (stage/fuse_epilogue.c), whose causal triangle the cpu kernel skips. */
#include "graph_internal.h"

#include <string.h>
#include <onnxpipe/graph_ir.h>

/* 1 when every reader of v broadcasts it against another operand with dim d (counted from
 * the end, as numpy aligns shapes) of size n. */
static int readers_broadcast(const pp_graph *g, int v, int back, int64_t n)
{
    const pp_value *val = &g->values[v];
    if (val->is_output || !val->nconsumers) return 0;
    for (int c = 0; c < val->nconsumers; c++) {
        const pp_node *nd = &g->nodes[val->consumers[c]];
        if (nd->op != PP_OP_ADD && nd->op != PP_OP_SUB && nd->op != PP_OP_MUL && nd->op != PP_OP_DIV &&
            nd->op != PP_OP_WHERE)
            return 0;
        int other = 0;
        for (int k = 0; k < nd->ninputs; k++) {
            int u = nd->inputs[k];
            if (u < 0 || u == v) continue;
            const pp_shape *s = &g->values[u].shape;
            other |= s->rank >= back && s->dims[s->rank - back] == n;
        }
        if (!other) return 0;
    }
    return 1;
}

/* 1 when the slices of t along dim d are all equal to the first. */
static int slices_equal(const pp_const_tensor *t, int d)
{
    size_t inner = pp_dtype_size(t->dtype);
    for (int k = d + 1; k < t->shape.rank; k++) inner *= (size_t)t->shape.dims[k];
    size_t outer = 1;
    for (int k = 0; k < d; k++) outer *= (size_t)t->shape.dims[k];
    const char *p = t->data;
    const int64_t n = t->shape.dims[d];
    for (size_t o = 0; o < outer; o++)
        for (int64_t i = 1; i < n; i++)
            if (memcmp(p + (o * (size_t)n + (size_t)i) * inner, p + o * (size_t)n * inner, inner)) return 0;
    return 1;
}

/* Keeps the first slice along dim d: t's data (graph-owned, folded) is compacted in place. */
static void keep_first_slice(pp_graph *g, pp_initializer *in, pp_value *v, int d)
{
    pp_const_tensor *t = &in->t;
    size_t inner = pp_dtype_size(t->dtype);
    for (int k = d + 1; k < t->shape.rank; k++) inner *= (size_t)t->shape.dims[k];
    size_t outer = 1;
    for (int k = 0; k < d; k++) outer *= (size_t)t->shape.dims[k];
    char *p = (char *)t->data;
    for (size_t o = 1; o < outer; o++) memmove(p + o * inner, p + o * (size_t)t->shape.dims[d] * inner, inner);
    t->shape.dims[d] = 1;
    t->nbytes = outer * inner;
    v->shape = t->shape;
    (void)g;
}

void graph_compact_constants(pp_graph *g)
{
    for (int i = 0; i < g->ninits; i++) {
        pp_initializer *in = &g->inits[i];
        pp_value *v = &g->values[in->value];
        if (!v->folded || in->t.shape.rank < 3) continue;
        for (int d = 0; d < in->t.shape.rank - 2; d++) {
            const int64_t n = in->t.shape.dims[d];
            if (n > 1 && readers_broadcast(g, in->value, in->t.shape.rank - d, n) && slices_equal(&in->t, d))
                keep_first_slice(g, in, v, d);
        }
    }
}
