/* Transposes folded into the MatMul that reads or makes them, no copy per microbatch forward
 * and none of the gradient backward, in two forms:
 *  - strided (PP_KCAP_MATMUL_STRIDED): a Transpose (explicit perm, rank >= 3) whose only
 *    reader is a MatMul operand, or that is the only reader of a MatMul's result, becomes a
 *    strided operand or output (attributes perm_A, perm_B, perm_Y: attention's heads;
 *    kernels/cpu/matmul.c);
 *  - transposed operand (PP_KCAP_MATMUL_TRANS_B, _TRANS_A): a Transpose of an operand's last
 *    two dims, Linear's MatMul(x, Transpose(W)) (the HF exports' every projection) and, where
 *    no strided form took it, attention's K^T, is read in place through the GEMM's transpose
 *    flag (attributes trans_B, trans_A).
 * stage_fuse runs the strided form after the attention pass, the other after RoPE's. */
#include "stage_fuse.h"

#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>

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

pp_status stage_fuse_strided_transposes(fuse_ctx *f, pp_error *err)
{
    (void)err;
    pp_stage *s = f->s;
    for (int o = 0; (f->mm_caps & PP_KCAP_MATMUL_STRIDED) && o < s->nops; o++)
        if (!f->gone[o] && foldable_matmul(s, &s->ops[o])) fold_transposes(s, f->op_of_node, o, f->gone);
    return PP_OK;
}

pp_status stage_fuse_transposed_operands(fuse_ctx *f, pp_error *err)
{
    (void)err;
    pp_stage *s = f->s;
    const unsigned mm_caps = f->mm_caps;
    for (int o = 0; (mm_caps & (PP_KCAP_MATMUL_TRANS_A | PP_KCAP_MATMUL_TRANS_B)) && o < s->nops; o++)
        for (int k = 0; k < 2; k++)
            if (!f->gone[o] && (mm_caps & (k ? PP_KCAP_MATMUL_TRANS_B : PP_KCAP_MATMUL_TRANS_A)))
                fold_trans(s, f->op_of_node, o, k, f->gone);
    return PP_OK;
}
