/* What the fusion passes match with (stage_fuse.h): an op's only reader, its producer, a
 * binary op's other input, scalar and matrix constants, a causal mask; and what they rewrite
 * with: an op made another, an attribute folded in. */
#include "stage_fuse.h"

#include <math.h>
#include <string.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

/* The op that is the only reader of tslot t (graph-wide, so no later stage reads it
 * either), if it is an `op` and lies in this stage; else -1. */
int stage_only_reader(const pp_stage *s, const int *op_of_node, int t, pp_op op)
{
    int v = s->t[t].value;
    if (v < 0) return -1;
    const pp_value *val = &s->g->values[v];
    if (val->nconsumers != 1 || val->is_output) return -1;
    int node = val->consumers[0];
    if (stage_side(s, node) != 0) return -1;
    int o = op_of_node[node - s->first];
    return o >= 0 && s->ops[o].op == op ? o : -1;
}

int stage_scalar_const(const pp_stage *s, int t, float *f)
{
    if (t < 0 || s->t[t].value < 0 || s->g->values[s->t[t].value].is_param) return 0;   /* trained: keep */
    const pp_const_tensor *c = pp_graph_const(s->g, s->t[t].value);
    if (!c || c->dtype != PP_DTYPE_F32 || c->nbytes != sizeof(float)) return 0;
    memcpy(f, c->data, sizeof *f);
    return 1;
}

int stage_is_const(const pp_stage *s, int t, double want)
{
    float f;
    return stage_scalar_const(s, t, &f) && fabs((double)f - want) <= 1e-6 * fabs(want);
}

int stage_producer(const pp_stage *s, const int *op_of_node, const char *gone, int t)
{
    const int v = t >= 0 ? s->t[t].value : -1, node = v >= 0 ? s->g->values[v].producer : -1;
    const int o = node >= 0 && stage_side(s, node) == 0 ? op_of_node[node - s->first] : -1;
    return o >= 0 && !gone[o] ? o : -1;
}

/* The input of binary op o that is not t, or -2 when t is not an input. */
int stage_other_input(const stage_op *op, int t)
{
    if (op->nin != 2 || op->nout != 1) return -2;
    return op->in[0] == t ? op->in[1] : op->in[1] == t ? op->in[0] : -2;
}

int stage_only_reader_via_views(const pp_stage *s, const char *gone, int t, pp_op op)
{
    for (int u = 0; u < s->nt; u++) {
        if (stage_base(s, u) != t || s->t[u].value < 0) continue;
        const pp_value *val = &s->g->values[s->t[u].value];
        if (val->is_output) return -1;
        for (int c = 0; c < val->nconsumers; c++)
            if (stage_side(s, val->consumers[c]) != 0) return -1;
    }
    int found = -1;
    for (int o = 0; o < s->nops; o++)
        for (int k = 0; !gone[o] && k < s->ops[o].nin; k++)
            if (s->ops[o].in[k] >= 0 && stage_base(s, s->ops[o].in[k]) == t) {
                if (found >= 0 && found != o) return -1;
                found = o;
            }
    return found >= 0 && s->ops[found].op == op ? found : -1;
}

const float *stage_const_matrix(const pp_stage *s, int t, int64_t R, int64_t C)
{
    if (t < 0) return NULL;
    const tslot *m = &s->t[t];
    if (m->value < 0 || s->g->values[m->value].is_param || m->dtype != PP_DTYPE_F32 || m->rank < 2 ||
        m->dims[m->rank - 2] != R || m->dims[m->rank - 1] != C)
        return NULL;
    for (int d = 0; d + 2 < m->rank; d++)
        if (m->dims[d] != 1) return NULL;
    const pp_const_tensor *c = pp_graph_const(s->g, m->value);
    if (!c || c->dtype != PP_DTYPE_F32 || c->nbytes != (size_t)(R * C) * sizeof(float)) return NULL;
    return c->data;
}

int stage_causal_mask(const pp_stage *s, int t, int64_t T)
{
    const float *v = stage_const_matrix(s, t, T, T);
    if (!v) return 0;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = i + 1; j < T; j++)
            if (!(v[i * T + j] <= -1e4f)) return 0;
    return 1;
}

/* Adds attribute a to op m after its own (a MatMul has none, a Softmax its axis, an op of
 * stage_op_become none): the marks perm_A / perm_B / perm_Y, causal_Y / causal_A, trans_B
 * (read by kernels/cpu/matmul.c) and a Softmax's causal (kernels/cpu/softmax.c), and the
 * attributes of fused ops. 0 (m unchanged) where they do not fit in m->folded. */
int stage_fold_attr(stage_op *m, pp_attr a)
{
    if (m->nattrs >= (int)(sizeof m->folded / sizeof m->folded[0])) return 0;
    if (m->attrs != m->folded && m->nattrs) memcpy(m->folded, m->attrs, (size_t)m->nattrs * sizeof *m->attrs);
    m->folded[m->nattrs++] = a;
    m->attrs = m->folded;
    return 1;
}

void stage_fuse_each(fuse_ctx *f, pp_op id, stage_fuse_at at)
{
    const pp_kernel *k = pp_kernel_find(id, pp_device_get_kind(f->s->dev), PP_DTYPE_F32);
    for (int o = 0; k && o < f->s->nops; o++)
        if (!f->gone[o]) at(f->s, k, f->op_of_node, o, f->gone);
}

/* Op m becomes a `id` op run by kernel k, with no attributes yet (stage_fold_attr adds them). */
void stage_op_become(stage_op *m, pp_op id, const pp_kernel *k)
{
    m->op = id;
    m->op_type = pp_op_get(id)->name;
    m->k = k;
    m->attrs = NULL;
    m->nattrs = 0;
}
