/* Op fusion as the stage is placed, so that fewer passes go over the activations:
 *  - exact GELU as exported below opset 20 (PyTorch's F.gelu, the example GPT) is five
 *    elementwise ops, y = (x * (erf(x / sqrt2) + 1)) * 0.5; it becomes one Gelu op;
 *    so does the tanh form as HF's gelu_new writes it (GPT-2: eight ops, match_gelu_tanh),
 *    as Gelu with approximate = 'tanh';
 *  - SiLU as HF's Llama family exports it, x * Sigmoid(x), becomes one Swish op (fuse_swish),
 *    and the gated MLP's Swish(gate) * up one SwiGLU(gate, up) (fuse_swiglu);
 *  - RMSNorm as HF's Llama family exports it (Pow, ReduceMean, Add eps, Sqrt, Reciprocal or
 *    Div, Mul, Mul by the weight: match_rmsnorm) becomes one RMSNormalization op;
 *  - HF's rotary embedding, x * cos + rotate_half(x) * sin (Slice, Slice, Neg, Concat, Mul,
 *    Mul, Add) with constant cos and sin of equal halves, becomes one RotaryEmbedding op
 *    (fuse_rope.c);
 *  - attention, Q K^T, scale, mask, Softmax, P V and the Transposes of its heads, becomes one
 *    Attention op where --fused-attention and the device's kernel say so (fuse_attention.c:
 *    cuDNN's flash attention under bf16/fp16 by default); it runs after the views below and
 *    takes the scores' MatMul with or without the scale and mask the cpu's MatMul fused;
 *  - where the MatMul kernel can (PP_KCAP_MATMUL_ALPHA, _BIAS: the cpu's), MatMul
 *    followed by Mul by a scalar constant becomes one MatMul with the scalar as a fourth
 *    input (kernels/cpu/matmul.c: sgemm's alpha), and a MatMul (scaled or not) followed
 *    by Add of a bias [N] or [M, N] (attention's causal mask) one MatMul with the bias as
 *    a third input (sgemm's C); not under --precision bf16/fp16 (see stage_fuse);
 *  - a Reshape / Flatten / Squeeze / Unsqueeze of an activation becomes a view of its
 *    input (same memory, same gradient memory; no copy) unless its result leaves the stage;
 *    so does an identity: a float Cast to its own type, a Dropout of ratio 0;
 *  - where the MatMul kernel can (PP_KCAP_MATMUL_STRIDED), a Transpose (explicit perm,
 *    rank >= 3) whose only reader is a MatMul operand, or that is the only reader of a
 *    MatMul's result, folds into the MatMul as a strided operand or output (attention's
 *    heads: no copies; kernels/cpu/matmul.c);
 *  - where the MatMul kernel can (PP_KCAP_MATMUL_TRANS_B, _TRANS_A), a Transpose of an
 *    operand's last two dims, Linear's MatMul(x, Transpose(W)) (the HF exports' every
 *    projection) and, where no strided form took it, attention's K^T, is read in place as a
 *    transposed operand (attributes trans_B, trans_A);
 *  - where the MatMul kernel can (PP_KCAP_MATMUL_CAUSAL), attention under a causal mask,
 *    MatMul + bias [T, T] that is <= -1e4 above its diagonal, then Softmax over the last
 *    axis, then MatMul of the probabilities, marks both products (causal_Y, causal_A) and,
 *    where its kernel can (PP_KCAP_SOFTMAX_CAUSAL), the Softmax (causal): exp underflows
 *    to exactly 0 above the diagonal, so the kernels skip that triangle (the same
 *    probabilities and gradients, about half the attention FLOPs and exps); the
 *    probabilities may pass through views (a Cast, a Dropout of ratio 0) on the way;
 *  - a residual Add read by a LayerNorm / RMSNorm becomes one Skip(Simplified)LayerNormalization
 *    (fuse_residual_norm.c).
 * Intermediates become unused aliases. Runs after collect(), before gradients and
 * memory are planned. */
#include "stage_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
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

/* A float scalar constant within 1e-6 of want. */
static int is_const(const pp_stage *s, int t, double want)
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

/* If op o starts the GELU pattern, fills chain[5] with its ops (Div Erf Add Mul Mul)
 * and returns x's tslot; else -1. */
static int match_gelu(const pp_stage *s, const int *op_of_node, int o, int chain[5])
{
    const stage_op *div = &s->ops[o];
    if (div->op != PP_OP_DIV || div->nin != 2 || div->nout != 1 || div->in[0] < 0 ||
        !is_const(s, div->in[1], sqrt(2.0)))
        return -1;
    int x = div->in[0];
    chain[0] = o;
    if ((chain[1] = stage_only_reader(s, op_of_node, div->out[0], PP_OP_ERF)) < 0) return -1;
    if ((chain[2] = stage_only_reader(s, op_of_node, s->ops[chain[1]].out[0], PP_OP_ADD)) < 0 ||
        !is_const(s, stage_other_input(&s->ops[chain[2]], s->ops[chain[1]].out[0]), 1.0))
        return -1;
    if ((chain[3] = stage_only_reader(s, op_of_node, s->ops[chain[2]].out[0], PP_OP_MUL)) < 0 ||
        stage_other_input(&s->ops[chain[3]], s->ops[chain[2]].out[0]) != x)
        return -1;
    if ((chain[4] = stage_only_reader(s, op_of_node, s->ops[chain[3]].out[0], PP_OP_MUL)) < 0 ||
        !is_const(s, stage_other_input(&s->ops[chain[4]], s->ops[chain[3]].out[0]), 0.5))
        return -1;
    return s->t[x].dtype == PP_DTYPE_F32 ? x : -1;
}

/* If op o starts the tanh GELU pattern (HF's gelu_new, GPT-2), 0.5 x (1 + tanh(sqrt(2/pi)
 * (x + 0.044715 x^3))) as exported, Pow(x, 3) Mul Add(x, .) Mul Tanh Add(1) Mul(h, .) with
 * h = Mul(x, 0.5), fills chain[8] with its ops (h last: the final Mul, which reads it,
 * comes after it) and returns x's tslot; else -1. */
static int match_gelu_tanh(const pp_stage *s, const int *op_of_node, int o, int chain[8])
{
    const stage_op *pw = &s->ops[o];
    if (pw->op != PP_OP_POW || pw->nin != 2 || pw->nout != 1 || pw->in[0] < 0 || !is_const(s, pw->in[1], 3.0))
        return -1;
    int x = pw->in[0], prev = pw->out[0];
    static const pp_op ops[6] = {PP_OP_MUL, PP_OP_ADD, PP_OP_MUL, PP_OP_TANH, PP_OP_ADD, PP_OP_MUL};
    static const double consts[6] = {0.044715, -1, 0.7978845608028654, 0, 1.0, -2};   /* -1: x, -2: h, 0: none */
    chain[0] = o;
    for (int k = 0; k < 6; k++) {
        int c = stage_only_reader(s, op_of_node, prev, ops[k]);
        if (c < 0) return -1;
        const stage_op *op = &s->ops[c];
        if (ops[k] != PP_OP_TANH) {
            int other = stage_other_input(op, prev);
            if (other < 0 || (consts[k] > 0 && !is_const(s, other, consts[k])) || (consts[k] == -1 && other != x))
                return -1;
            if (consts[k] == -2) {   /* h = Mul(x, 0.5), read by this Mul only */
                int h = s->t[other].value >= 0 ? s->g->values[s->t[other].value].producer : -1;
                int ho = h >= 0 && stage_side(s, h) == 0 ? op_of_node[h - s->first] : -1;
                if (ho < 0 || s->ops[ho].op != PP_OP_MUL || stage_other_input(&s->ops[ho], x) < 0 ||
                    !is_const(s, stage_other_input(&s->ops[ho], x), 0.5) ||
                    stage_only_reader(s, op_of_node, other, PP_OP_MUL) != c)
                    return -1;
                chain[7] = ho;
            }
        }
        chain[k + 1] = c;
        prev = op->out[0];
    }
    /* the final Mul is the chain's last op: it becomes Gelu, and h goes */
    int last = chain[6];
    chain[6] = chain[7];
    chain[7] = last;
    return s->t[x].dtype == PP_DTYPE_F32 ? x : -1;
}

/* If op o is a Sigmoid of a float x whose result only a Mul by that same x reads (SiLU as
 * HF's Llama family and torch export it), makes that Mul Swish(x) (alpha 1) and drops the
 * Sigmoid: one pass over x forward and one backward, nothing saved but x. */
static void fuse_swish(pp_stage *s, const pp_kernel *swish, const int *op_of_node, int o, char *gone)
{
    const stage_op *sig = &s->ops[o];
    if (sig->op != PP_OP_SIGMOID || sig->nin != 1 || sig->nout != 1 || sig->in[0] < 0 ||
        s->t[sig->in[0]].dtype != PP_DTYPE_F32)
        return;
    const int x = sig->in[0], mul = stage_only_reader(s, op_of_node, sig->out[0], PP_OP_MUL);
    if (mul < 0 || stage_other_input(&s->ops[mul], sig->out[0]) != x) return;
    stage_op *op = &s->ops[mul];
    stage_op_become(op, PP_OP_SWISH, swish);
    op->nin = 1;
    op->in[0] = x;
    if (op->host_in) op->host_in[0] = NULL;
    gone[o] = 1;
    s->t[sig->out[0]].view_of = x;   /* unused from now on */
    pp_log(PP_LOG_DEBUG, "stage: fused '%s' * Sigmoid '%s' into one Swish", op->name, sig->name);
}

/* If op o is a Swish (alpha 1, fuse_swish's) whose result only a Mul by a float of its
 * shape reads (HF's gated MLP: act(gate) * up), makes that Mul SwiGLU(gate, up) and drops
 * the Swish: three passes over [tokens, ffn] forward instead of five, eight backward
 * instead of eleven, and the Swish's output not kept. */
static void fuse_swiglu(pp_stage *s, const pp_kernel *swiglu, const int *op_of_node, int o, char *gone)
{
    const stage_op *sw = &s->ops[o];
    if (sw->op != PP_OP_SWISH || sw->nattrs != 0 || sw->nin != 1 || sw->nout != 1) return;
    const int x = sw->in[0], y = sw->out[0], mul = stage_only_reader(s, op_of_node, y, PP_OP_MUL);
    const int u = mul < 0 ? -1 : stage_other_input(&s->ops[mul], y);
    if (u < 0 || s->t[u].dtype != PP_DTYPE_F32 || s->t[u].rank != s->t[x].rank ||
        memcmp(s->t[u].dims, s->t[x].dims, (size_t)s->t[x].rank * sizeof s->t[x].dims[0]))
        return;
    stage_op *op = &s->ops[mul];
    stage_op_become(op, PP_OP_SWIGLU, swiglu);
    op->in[0] = x;
    op->in[1] = u;
    if (op->host_in) op->host_in[0] = op->host_in[1] = NULL;
    gone[o] = 1;
    s->t[y].view_of = x;   /* unused from now on */
    pp_log(PP_LOG_DEBUG, "stage: fused Swish '%s' * '%s' into one SwiGLU", sw->name, op->name);
}

/* If op o is a MatMul (with a fused scale or none) whose result only an Add of a float
 * [N] or [M, N] (its last dims; or [1, .., 1, M, N]) reads, returns that Add's op and sets *bias; else -1. */
static int match_bias(const pp_stage *s, const int *op_of_node, int o, int *bias)
{
    const stage_op *mm = &s->ops[o];
    if (mm->op != PP_OP_MATMUL || (mm->nin != 2 && (mm->nin != 4 || mm->in[2] >= 0)) || mm->nout != 1 ||
        mm->in[0] < 0 || mm->in[1] < 0)
        return -1;
    int y0 = mm->out[0], add = stage_only_reader(s, op_of_node, y0, PP_OP_ADD);
    if (add < 0) return -1;
    int b = stage_other_input(&s->ops[add], y0), y = s->ops[add].out[0];
    if (b < 0 || y < 0 || s->t[b].dtype != PP_DTYPE_F32 || s->t[y].nbytes != s->t[y0].nbytes) return -1;
    const tslot *tb = &s->t[b], *ty0 = &s->t[y0];
    if (tb->rank < 1 || ty0->rank < tb->rank) return -1;
    for (int d = 0; d + 2 < tb->rank; d++)   /* [1, .., 1, M, N]: a mask kept once (graph/compact.c) */
        if (tb->dims[d] != 1) return -1;
    for (int d = 1; d <= tb->rank && d <= 2; d++)
        if (tb->dims[tb->rank - d] != ty0->dims[ty0->rank - d]) return -1;
    *bias = b;
    return add;
}

/* If op o is a MatMul without a fused bias whose result only a Mul by a float scalar
 * constant reads (attention's 1/sqrt(d) scale), returns that Mul's op and sets *scale
 * to the constant's tslot; else -1. */
static int match_scale(const pp_stage *s, const int *op_of_node, int o, int *scale)
{
    const stage_op *mm = &s->ops[o];
    float f;
    if (mm->op != PP_OP_MATMUL || mm->nin != 2 || mm->nout != 1 || mm->in[0] < 0 || mm->in[1] < 0)
        return -1;
    int mul = stage_only_reader(s, op_of_node, mm->out[0], PP_OP_MUL);
    if (mul < 0 || s->ops[mul].out[0] < 0) return -1;
    *scale = stage_other_input(&s->ops[mul], mm->out[0]);
    return stage_scalar_const(s, *scale, &f) ? mul : -1;
}

/* The Mul at position mul becomes MatMul(A, B, -, scale) -> the Mul's output. */
static pp_status fuse_scale(pp_stage *s, int o, int mul, int scale, char *gone, pp_error *err)
{
    stage_op *mm = &s->ops[o], *op = &s->ops[mul];
    int *in = realloc(op->in, 4 * sizeof *in);
    if (in) op->in = in;
    const void **host_in = realloc(op->host_in, 4 * sizeof *host_in);
    if (host_in) op->host_in = host_in;
    if (!in || !host_in) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    const void *hs = op->host_in[op->in[0] == scale ? 0 : 1];
    op->node = mm->node;
    op->name = mm->name;
    op->op = mm->op;
    op->op_type = mm->op_type;
    op->attrs = mm->attrs;
    op->nattrs = mm->nattrs;
    op->k = mm->k;
    op->nin = 4;
    op->in[0] = mm->in[0];
    op->in[1] = mm->in[1];
    op->in[2] = -1;
    op->in[3] = scale;
    op->host_in[0] = mm->host_in ? mm->host_in[0] : NULL;
    op->host_in[1] = mm->host_in ? mm->host_in[1] : NULL;
    op->host_in[2] = NULL;
    op->host_in[3] = hs;
    gone[o] = 1;
    s->t[mm->out[0]].view_of = mm->in[0];   /* unused from now on */
    return PP_OK;
}

/* The Add at position add becomes MatMul(A, W, bias[, scale]) -> the Add's output. */
static pp_status fuse_bias(pp_stage *s, int o, int add, int bias, char *gone, pp_error *err)
{
    stage_op *mm = &s->ops[o], *op = &s->ops[add];
    const int nin = mm->nin == 4 ? 4 : 3;   /* the Add's in and host_in hold 2 + 1 = 3 entries */
    if (nin == 4) {
        int *in = realloc(op->in, 4 * sizeof *in);
        if (in) op->in = in;
        const void **host_in = op->host_in ? realloc(op->host_in, 4 * sizeof *host_in) : NULL;
        if (host_in) op->host_in = host_in;
        if (!in || (op->host_in && !host_in)) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    }
    int y0 = mm->out[0];
    const void *hb = op->host_in ? op->host_in[op->in[0] == bias ? 0 : 1] : NULL;
    op->node = mm->node;
    op->name = mm->name;
    op->op = mm->op;
    op->op_type = mm->op_type;
    op->attrs = mm->attrs;
    op->nattrs = mm->nattrs;
    op->k = mm->k;
    op->nin = nin;
    op->in[0] = mm->in[0];
    op->in[1] = mm->in[1];
    op->in[2] = bias;
    if (nin == 4) op->in[3] = mm->in[3];
    if (op->host_in) {
        for (int i = 0; i < nin; i++) op->host_in[i] = i != 2 && mm->host_in ? mm->host_in[i] : NULL;
        op->host_in[2] = hb;
    }
    gone[o] = 1;
    s->t[y0].view_of = mm->in[0];   /* unused from now on */
    return PP_OK;
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

/* Op m becomes a `id` op run by kernel k, with no attributes yet (stage_fold_attr adds them). */
void stage_op_become(stage_op *m, pp_op id, const pp_kernel *k)
{
    m->op = id;
    m->op_type = pp_op_get(id)->name;
    m->k = k;
    m->attrs = NULL;
    m->nattrs = 0;
}

/* The explicit perm of Transpose op t, rank >= 3, else NULL. */
static const pp_attr *transpose_perm(const stage_op *t)
{
    if (t->op != PP_OP_TRANSPOSE || t->nin != 1 || t->nout != 1 || t->in[0] < 0 || t->out[0] < 0) return NULL;
    const pp_attr *a = pp_attr_find(t->attrs, t->nattrs, "perm");
    return a && a->type == PP_ATTR_INTS && a->n >= 3 ? a : NULL;
}

/* A MatMul without attributes whose float operands and result have one rank >= 3 and
 * equal batch dims: the kernel can take folded Transposes (of the output only without a
 * fused bias). */
static int foldable_matmul(const pp_stage *s, const stage_op *m)
{
    if (m->op != PP_OP_MATMUL || m->nattrs || m->nout != 1 || m->out[0] < 0 || m->in[0] < 0 || m->in[1] < 0 ||
        m->in[0] == m->in[1])
        return 0;
    const tslot *a = &s->t[m->in[0]], *b = &s->t[m->in[1]], *y = &s->t[m->out[0]];
    if (y->rank < 3 || a->rank != y->rank || b->rank != y->rank || a->dtype != PP_DTYPE_F32 ||
        b->dtype != PP_DTYPE_F32)
        return 0;
    for (int d = 0; d + 2 < y->rank; d++)
        if (a->dims[d] != y->dims[d] || b->dims[d] != y->dims[d]) return 0;
    return 1;
}

/* Folds the Transposes around MatMul op o (foldable_matmul): an operand's producer whose
 * only reader it is, and its result's only reader, each when the folded matrix keeps a
 * unit stride in one of its last two dims (one sgemm per batch). */
static void fold_transposes(pp_stage *s, const int *op_of_node, int o, char *gone)
{
    stage_op *m = &s->ops[o];
    static const char *const names[3] = {"perm_A", "perm_B", "perm_Y"};
    for (int k = 0; k < 3; k++) {
        int t = -1;
        if (k < 2) {   /* operand k: Transpose(x) -> m */
            int v = s->t[m->in[k]].value, node = v >= 0 ? s->g->values[v].producer : -1;
            t = node >= 0 && stage_side(s, node) == 0 ? op_of_node[node - s->first] : -1;
            if (t < 0 || gone[t] || stage_only_reader(s, op_of_node, m->in[k], PP_OP_MATMUL) != o) t = -1;
        } else if (m->nin < 3 || m->in[2] < 0) {
            t = stage_only_reader(s, op_of_node, m->out[0], PP_OP_TRANSPOSE);
        }
        const pp_attr *perm = t >= 0 && !gone[t] ? transpose_perm(&s->ops[t]) : NULL;
        if (!perm || perm->n != s->t[m->out[0]].rank) continue;
        const int r = perm->n;
        /* operand: logical dim j is x's dim perm[j]; output: y's dim j is logical dim perm[j] */
        int unit = k < 2 ? perm->ints[r - 1] == r - 1 || perm->ints[r - 2] == r - 1
                         : perm->ints[r - 1] == r - 1 || perm->ints[r - 1] == r - 2;
        if (!unit) continue;
        stage_op *tr = &s->ops[t];
        if (k < 2) {
            s->t[m->in[k]].view_of = tr->in[0];   /* unused from now on */
            m->in[k] = tr->in[0];
            if (m->host_in) m->host_in[k] = tr->host_in ? tr->host_in[0] : NULL;
        } else {
            s->t[m->out[0]].view_of = m->in[0];   /* unused from now on */
            m->out[0] = tr->out[0];
        }
        stage_fold_attr(m, (pp_attr){.name = names[k], .type = PP_ATTR_INTS, .n = r, .ints = perm->ints});
        gone[t] = 1;
        pp_log(PP_LOG_DEBUG, "stage: folded Transpose '%s' into MatMul '%s'", tr->name, m->name);
    }
}

/* Folds a Transpose of the last two dims of MatMul op o's input k into it as attribute trans_A
 * (k 0) or trans_B (k 1): the MatMul has no attributes but these, and its input k is a float
 * Transpose that only it reads, of a tensor of rank >= 2, swapping its last two dims only (perm
 * [1, 0] or none at rank 2: Linear's MatMul(x, Transpose(W)), the HF exports' every projection;
 * [0, .., r-1, r-2] above: attention's K^T where the kernel cannot take it as a strided operand).
 * The kernel then reads the tensor, and writes its gradient, through the GEMM's transpose flag:
 * no copy per microbatch forward, none of the gradient backward. */
static void fold_trans(pp_stage *s, const int *op_of_node, int o, int k, char *gone)
{
    static const char *const names[2] = {"trans_A", "trans_B"};
    stage_op *m = &s->ops[o];
    if (m->op != PP_OP_MATMUL || m->nout != 1 || m->in[0] < 0 || m->in[1] < 0 || m->in[0] == m->in[1]) return;
    for (int i = 0; i < m->nattrs; i++)
        if (strcmp(m->attrs[i].name, names[0]) && strcmp(m->attrs[i].name, names[1])) return;
    int v = s->t[m->in[k]].value, node = v >= 0 ? s->g->values[v].producer : -1;
    int t = node >= 0 && stage_side(s, node) == 0 ? op_of_node[node - s->first] : -1;
    if (t < 0 || gone[t] || stage_only_reader(s, op_of_node, m->in[k], PP_OP_MATMUL) != o) return;
    const stage_op *tr = &s->ops[t];
    const int r = tr->nin == 1 && tr->in[0] >= 0 ? s->t[tr->in[0]].rank : 0;
    if (tr->op != PP_OP_TRANSPOSE || tr->nout != 1 || r < 2 || s->t[tr->in[0]].dtype != PP_DTYPE_F32) return;
    const pp_attr *perm = pp_attr_find(tr->attrs, tr->nattrs, "perm");
    if (perm && (perm->type != PP_ATTR_INTS || perm->n != r)) return;
    if (!perm && r != 2) return;   /* no perm reverses every dim */
    for (int d = 0; perm && d < r; d++)
        if (perm->ints[d] != (d < r - 2 ? d : d == r - 2 ? r - 1 : r - 2)) return;
    s->t[m->in[k]].view_of = tr->in[0];   /* unused from now on */
    m->in[k] = tr->in[0];
    if (m->host_in) m->host_in[k] = tr->host_in ? tr->host_in[0] : NULL;
    stage_fold_attr(m, (pp_attr){.name = names[k], .type = PP_ATTR_INT, .i = 1});
    gone[t] = 1;
    pp_log(PP_LOG_DEBUG, "stage: folded Transpose '%s' into MatMul '%s' (%s)", tr->name, m->name, names[k]);
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

/* If op o is a MatMul with a fused causal mask (causal_mask) whose result only a Softmax
 * over the last axis reads, marks it causal_Y, the Softmax causal where its kernel can
 * (PP_KCAP_SOFTMAX_CAUSAL), and the MatMul that alone reads the Softmax's result (or views
 * of it), as its input 0, causal_A. */
static void mark_causal(pp_stage *s, const int *op_of_node, const char *gone, int o)
{
    stage_op *mm = &s->ops[o];
    if (mm->op != PP_OP_MATMUL || mm->nin < 3 || mm->in[2] < 0 || mm->nout != 1 || mm->out[0] < 0) return;
    const tslot *y = &s->t[mm->out[0]];
    if (y->rank < 2 || y->dims[y->rank - 2] != y->dims[y->rank - 1] ||
        !stage_causal_mask(s, mm->in[2], y->dims[y->rank - 1]))
        return;
    int sm = stage_only_reader(s, op_of_node, mm->out[0], PP_OP_SOFTMAX);
    int64_t axis;
    if (sm < 0 || s->ops[sm].out[0] < 0 ||
        pp_attr_int(s->ops[sm].attrs, s->ops[sm].nattrs, "axis", s->g->opset >= 13 ? -1 : 1, &axis, NULL, NULL) ||
        (axis != -1 && axis != y->rank - 1))
        return;
    /* each mark is right without the others: what one op skips is the mask or exact zeros to them */
    if (stage_fold_attr(mm, (pp_attr){.name = "causal_Y", .type = PP_ATTR_INT, .i = 1}))
        pp_log(PP_LOG_DEBUG, "stage: MatMul '%s' computes the causal triangle only", mm->name);
    if ((s->ops[sm].k->caps & PP_KCAP_SOFTMAX_CAUSAL) &&
        stage_fold_attr(&s->ops[sm], (pp_attr){.name = "causal", .type = PP_ATTR_INT, .i = 1}))
        pp_log(PP_LOG_DEBUG, "stage: Softmax '%s' sums the causal triangle only", s->ops[sm].name);
    const int p = s->ops[sm].out[0], pv = stage_only_reader_via_views(s, gone, p, PP_OP_MATMUL);
    if (pv < 0 || stage_base(s, s->ops[pv].in[0]) != p || stage_base(s, s->ops[pv].in[1]) == p) return;
    if (stage_fold_attr(&s->ops[pv], (pp_attr){.name = "causal_A", .type = PP_ATTR_INT, .i = 1}))
        pp_log(PP_LOG_DEBUG, "stage: MatMul '%s' skips the causal zeros of its input 0", s->ops[pv].name);
}

/* Whether ReduceMean op r averages over the last axis only (rank `rank`) and keeps it:
 * axes [-1] or [rank - 1], from the attribute (opset < 18) or a constant input. */
static int mean_last_axis(const pp_stage *s, const stage_op *r, int rank)
{
    int64_t keep;
    if (pp_attr_int(r->attrs, r->nattrs, "keepdims", 1, &keep, NULL, NULL) || !keep) return 0;
    const int64_t *axes = NULL;
    int n = 0;
    const pp_attr *a = pp_attr_find(r->attrs, r->nattrs, "axes");
    if (a && a->type == PP_ATTR_INTS) axes = a->ints, n = a->n;
    else if (r->nin > 1 && r->in[1] >= 0 && s->t[r->in[1]].value >= 0) {
        const pp_const_tensor *c = pp_graph_const(s->g, s->t[r->in[1]].value);
        if (c && c->dtype == PP_DTYPE_I64) axes = c->data, n = (int)(c->nbytes / sizeof(int64_t));
    }
    return n == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/* If op o starts RMSNorm as HF's LlamaRMSNorm exports it, w * (x * 1/sqrt(mean(x^2) + eps)):
 * Pow(x, 2), ReduceMean over the last axis, Add(eps), Sqrt, Reciprocal or Div(1, .),
 * Mul(x, .), then (through views: the torchscript export's Cast) Mul by w [D]; fills
 * chain[7] with those ops and returns x's tslot, w in *w and eps in *eps; else -1. */
static int match_rmsnorm(const pp_stage *s, const int *op_of_node, const char *gone, int o, int chain[7], int *w,
                         float *eps)
{
    const stage_op *pw = &s->ops[o];
    if (pw->op != PP_OP_POW || pw->nin != 2 || pw->nout != 1 || pw->in[0] < 0 || !is_const(s, pw->in[1], 2.0))
        return -1;
    const int x = pw->in[0];
    const tslot *tx = &s->t[x];
    if (tx->dtype != PP_DTYPE_F32 || tx->rank < 1) return -1;
    chain[0] = o;
    if ((chain[1] = stage_only_reader(s, op_of_node, pw->out[0], PP_OP_REDUCE_MEAN)) < 0 ||
        !mean_last_axis(s, &s->ops[chain[1]], tx->rank))
        return -1;
    if ((chain[2] = stage_only_reader(s, op_of_node, s->ops[chain[1]].out[0], PP_OP_ADD)) < 0 ||
        !stage_scalar_const(s, stage_other_input(&s->ops[chain[2]], s->ops[chain[1]].out[0]), eps) || !(*eps >= 0.f))
        return -1;
    if ((chain[3] = stage_only_reader(s, op_of_node, s->ops[chain[2]].out[0], PP_OP_SQRT)) < 0) return -1;
    const int sq = s->ops[chain[3]].out[0];
    if ((chain[4] = stage_only_reader(s, op_of_node, sq, PP_OP_RECIPROCAL)) < 0) {
        if ((chain[4] = stage_only_reader(s, op_of_node, sq, PP_OP_DIV)) < 0 || s->ops[chain[4]].in[1] != sq ||
            !is_const(s, s->ops[chain[4]].in[0], 1.0))
            return -1;
    }
    if ((chain[5] = stage_only_reader(s, op_of_node, s->ops[chain[4]].out[0], PP_OP_MUL)) < 0 ||
        stage_other_input(&s->ops[chain[5]], s->ops[chain[4]].out[0]) != x)
        return -1;
    const int n = s->ops[chain[5]].out[0];
    if ((chain[6] = stage_only_reader_via_views(s, gone, n, PP_OP_MUL)) < 0) return -1;
    const stage_op *m = &s->ops[chain[6]];
    if (m->nin != 2 || m->nout != 1 || m->in[0] < 0 || m->in[1] < 0 || m->out[0] < 0) return -1;
    *w = stage_base(s, m->in[0]) == n ? m->in[1] : m->in[0];
    const tslot *tw = &s->t[*w];
    if (stage_base(s, *w) == n || tw->dtype != PP_DTYPE_F32 || tw->rank != 1 ||
        tw->dims[0] != tx->dims[tx->rank - 1] || s->t[m->out[0]].nbytes != tx->nbytes)
        return -1;
    return x;
}

/* The last op of an RMSNorm chain (match_rmsnorm) becomes RMSNormalization(x, w) over the
 * last axis with the chain's eps; the others go. x and w are defined before that op. */
static void fuse_rmsnorm(pp_stage *s, const pp_kernel *k, const int chain[7], int x, int w, float eps, char *gone)
{
    stage_op *last = &s->ops[chain[6]];
    const void *hw = last->host_in ? last->host_in[last->in[0] == w ? 0 : 1] : NULL;
    pp_log(PP_LOG_DEBUG, "stage: fused RMSNorm '%s' .. '%s' into one RMSNormalization", s->ops[chain[0]].name,
           last->name);
    stage_op_become(last, PP_OP_RMS_NORMALIZATION, k);
    stage_fold_attr(last, (pp_attr){.name = "axis", .type = PP_ATTR_INT, .i = -1});
    stage_fold_attr(last, (pp_attr){.name = "epsilon", .type = PP_ATTR_FLOAT, .f = eps});
    last->in[0] = x;
    last->in[1] = w;
    if (last->host_in) last->host_in[0] = NULL, last->host_in[1] = hw;
    for (int i = 0; i < 6; i++) {
        const int t = s->ops[chain[i]].out[0];
        for (int u = 0; u < s->nt; u++)   /* views of an intermediate (the torchscript Cast's) */
            if (s->t[u].view_of == t) s->t[u].view_of = x;
        s->t[t].view_of = x;   /* unused from now on */
        gone[chain[i]] = 1;
    }
}

/* An op whose result equals its input: a Cast to the input's own type (reshape_to_view
 * checks the dtypes), or a Dropout of ratio 0 whose mask nobody reads (HF's torchscript
 * exports write both in attention); other ops have one output. */
static int identity_op(const pp_stage *s, const stage_op *op)
{
    if (op->op == PP_OP_CAST) return op->nout == 1;
    if (op->op != PP_OP_DROPOUT || op->nin < 2 || !is_const(s, op->in[1], 0.0)) return 0;
    if (op->nout == 1 || op->out[1] < 0) return 1;
    const tslot *mask = &s->t[op->out[1]];
    return op->nout == 2 && mask->value >= 0 && !s->g->values[mask->value].nconsumers &&
           !s->g->values[mask->value].is_output;
}

/* If op o only changes the shape of an activation (not a trained or constant tensor), or
 * is an identity (identity_op), and its result is read in this stage only, the result
 * becomes a view of the input's
 * base and the op goes. Every tensor keeps one element order, so readers see the same
 * bytes; gradients of both add into one buffer, which is what the copy's backward did. */
static void reshape_to_view(pp_stage *s, int o, char *gone)
{
    const stage_op *op = &s->ops[o];
    const int view = (pp_op_get(op->op)->flags & PP_OPF_VIEW) && op->nout == 1;
    if ((!view && !identity_op(s, op)) || op->in[0] < 0 || op->out[0] < 0) return;
    int x = stage_base(s, op->in[0]), y = op->out[0];
    const tslot *tx = &s->t[x], *ty = &s->t[y];
    if (tx->value < 0 || ty->value < 0 || tx->nbytes != ty->nbytes || tx->dtype != ty->dtype) return;
    const pp_value *vx = &s->g->values[tx->value], *vy = &s->g->values[ty->value];
    if (vx->init >= 0 || vy->is_output) return;
    for (int c = 0; c < vy->nconsumers; c++)
        if (stage_side(s, vy->consumers[c]) > 0) return;
    s->t[y].view_of = x;
    gone[o] = 1;
}

pp_status stage_fuse(pp_stage *s, pp_error *err)
{
    const pp_kernel *gelu = pp_kernel_find(PP_OP_GELU, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    const pp_kernel *matmul = pp_kernel_find(PP_OP_MATMUL, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    const pp_kernel *rms = pp_kernel_find(PP_OP_RMS_NORMALIZATION, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    const pp_kernel *swish = pp_kernel_find(PP_OP_SWISH, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    const pp_kernel *swiglu = pp_kernel_find(PP_OP_SWIGLU, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    const pp_kernel *rope = pp_kernel_find(PP_OP_ROTARY_EMBEDDING, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    float eps;
    /* under 16-bit precision a product is rounded before its scale and bias are applied, as
     * it is where a cut separates them: no epilogue fusion, so layouts round alike */
    int narrow = s->opt.precision == PP_DTYPE_BF16 || s->opt.precision == PP_DTYPE_F16;
    unsigned epilogue = PP_KCAP_MATMUL_ALPHA | PP_KCAP_MATMUL_BIAS;
    const unsigned mm_caps = matmul ? matmul->caps & (narrow ? ~epilogue : ~0u) : 0;
    if (s->nops < 2) return PP_OK;
    int span = s->end - s->first;
    int *op_of_node = malloc((size_t)span * sizeof *op_of_node);
    char *gone = calloc((size_t)s->nops, 1);
    if (!op_of_node || !gone) {
        free(op_of_node);
        free(gone);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    }
    pp_status st = PP_OK;
    for (int i = 0; i < span; i++) op_of_node[i] = -1;
    for (int o = 0; o < s->nops; o++)
        if (s->ops[o].node >= s->first && s->ops[o].node < s->end) op_of_node[s->ops[o].node - s->first] = o;
    /* scales first: a fused MatMul sits where its Mul was, and its result's Add follows */
    for (int o = 0; (mm_caps & PP_KCAP_MATMUL_ALPHA) && o < s->nops; o++) {
        int scale, mul = gone[o] ? -1 : match_scale(s, op_of_node, o, &scale);
        if (mul < 0) continue;
        pp_log(PP_LOG_DEBUG, "stage: fused '%s' * scale '%s' into one MatMul", s->ops[o].name, s->ops[mul].name);
        PP_CHECK_GOTO(fuse_scale(s, o, mul, scale, gone, err), st, done);
    }
    for (int o = 0; (mm_caps & PP_KCAP_MATMUL_BIAS) && o < s->nops; o++) {
        int bias, add = gone[o] ? -1 : match_bias(s, op_of_node, o, &bias);
        if (add < 0) continue;
        pp_log(PP_LOG_DEBUG, "stage: fused '%s' + bias '%s' into one MatMul", s->ops[o].name, s->ops[add].name);
        PP_CHECK_GOTO(fuse_bias(s, o, add, bias, gone, err), st, done);
    }
    for (int o = 0; gelu && o < s->nops; o++) {
        int chain[8], n = 5, x = gone[o] ? -1 : match_gelu(s, op_of_node, o, chain);
        if (x < 0 && !gone[o] && (x = match_gelu_tanh(s, op_of_node, o, chain)) >= 0) n = 8;
        if (x < 0) continue;
        /* the last op of the chain becomes Gelu(x): x is defined before the chain, and
         * the readers of the result come after the last Mul */
        stage_op *last = &s->ops[chain[n - 1]];
        stage_op_become(last, PP_OP_GELU, gelu);
        if (n == 8) stage_fold_attr(last, (pp_attr){.name = "approximate", .type = PP_ATTR_STRING, .s = "tanh"});
        last->nin = 1;
        last->in[0] = x;
        if (last->host_in) last->host_in[0] = NULL;
        pp_log(PP_LOG_DEBUG, "stage: fused %s GELU '%s' .. '%s' into one Gelu", n == 8 ? "tanh" : "erf",
               s->ops[chain[0]].name, last->name);
        for (int k = 0; k < n - 1; k++) {
            gone[chain[k]] = 1;
            s->t[s->ops[chain[k]].out[0]].view_of = x;   /* unused from now on */
        }
    }
    for (int o = 0; swish && o < s->nops; o++)
        if (!gone[o]) fuse_swish(s, swish, op_of_node, o, gone);
    for (int o = 0; swiglu && o < s->nops; o++)
        if (!gone[o]) fuse_swiglu(s, swiglu, op_of_node, o, gone);
    for (int o = 0; o < s->nops; o++)
        if (!gone[o]) reshape_to_view(s, o, gone);
    /* a fused MatMul sits where its Add or Mul was, under the MatMul's node */
    for (int i = 0; i < span; i++) op_of_node[i] = -1;
    for (int o = 0; o < s->nops; o++)
        if (!gone[o] && s->ops[o].node >= s->first && s->ops[o].node < s->end) op_of_node[s->ops[o].node - s->first] = o;
    if (stage_fuse_attention(s, op_of_node, gone, err) < 0) {
        st = err ? err->status : PP_ERR_NOMEM;
        goto done;
    }
    for (int o = 0; (mm_caps & PP_KCAP_MATMUL_STRIDED) && o < s->nops; o++)
        if (!gone[o] && foldable_matmul(s, &s->ops[o])) fold_transposes(s, op_of_node, o, gone);
    for (int o = 0; rms && o < s->nops; o++) {
        int chain[7], w, x = gone[o] ? -1 : match_rmsnorm(s, op_of_node, gone, o, chain, &w, &eps);
        if (x >= 0) fuse_rmsnorm(s, rms, chain, x, w, eps, gone);
    }
    for (int o = 0; rope && o < s->nops; o++)
        if (!gone[o]) stage_fuse_rope(s, rope, op_of_node, o, gone);
    for (int o = 0; (mm_caps & (PP_KCAP_MATMUL_TRANS_A | PP_KCAP_MATMUL_TRANS_B)) && o < s->nops; o++)
        for (int k = 0; k < 2; k++)
            if (!gone[o] && (mm_caps & (k ? PP_KCAP_MATMUL_TRANS_B : PP_KCAP_MATMUL_TRANS_A)))
                fold_trans(s, op_of_node, o, k, gone);
    for (int o = 0; (mm_caps & PP_KCAP_MATMUL_CAUSAL) && o < s->nops; o++)
        if (!gone[o]) mark_causal(s, op_of_node, gone, o);
    for (int o = 0; o < s->nops; o++)
        if (!gone[o]) PP_CHECK_GOTO(stage_fuse_residual_norm(s, op_of_node, o, gone, err), st, done);
    int n = 0;
    for (int o = 0; o < s->nops; o++) {
        if (gone[o]) {
            free(s->ops[o].in);
            free(s->ops[o].out);
            free(s->ops[o].host_in);
            continue;
        }
        s->ops[n] = s->ops[o];
        if (s->ops[o].attrs == s->ops[o].folded) s->ops[n].attrs = s->ops[n].folded;
        n++;
    }
    s->nops = n;
done:
    free(op_of_node);
    free(gone);
    return st;
}
