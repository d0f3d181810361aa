/* HF's rotary embedding as both PyTorch exporters write it, x * cos + rotate_half(x) * sin
 * with rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2]) (Slice, Slice, Neg, Concat, Mul,
 * Mul, Add, for q and k in every layer), becomes one RotaryEmbedding (non-interleaved) over
 * x [B, H, S, D]: y[k] = x1 c - x2 s, y[k + D/2] = x2 c + x1 s for (x1, x2) = (x[k],
 * x[k + D/2]), k < D/2, which is the chain's value when cos and sin are constants
 * [1, .., 1, S, D] whose halves along the last axis are equal (HF's cat(freqs, freqs)). The
 * op reads those constants in place (attribute hf_caches: kernels/op_args_nn.h), so no new
 * constant is made. A pass of stage_fuse (fuse.c). */
#include "stage_fuse.h"

#include <string.h>
#include <onnxpipe/graph_ir.h>

/* The one-element integer constant tslot t holds: 1 and its value in *v, else 0. */
static int int_const(const pp_stage *s, int t, int64_t *v)
{
    const pp_const_tensor *c = t >= 0 && s->t[t].value >= 0 ? pp_graph_const(s->g, s->t[t].value) : NULL;
    if (c && c->dtype == PP_DTYPE_I64 && c->nbytes == sizeof(int64_t)) {
        memcpy(v, c->data, sizeof *v);
        return 1;
    }
    if (c && c->dtype == PP_DTYPE_I32 && c->nbytes == sizeof(int32_t)) {
        int32_t i;
        memcpy(&i, c->data, sizeof i);
        *v = i;
        return 1;
    }
    return 0;
}

/* Whether Slice op sl takes exactly [lo, hi) of the last axis (length d) of its input of
 * rank r: starts, ends, axes (required: the default is axis 0) and steps (1) as constant
 * inputs (opset >= 10), bounds clamped as ONNX says. */
static int slices(const pp_stage *s, const stage_op *sl, int r, int64_t d, int64_t lo, int64_t hi)
{
    int64_t start, end, axis, step = 1;
    if (sl->op != PP_OP_SLICE || sl->nin < 4 || sl->nout != 1 || !int_const(s, sl->in[1], &start) ||
        !int_const(s, sl->in[2], &end) || !int_const(s, sl->in[3], &axis) ||
        (sl->nin > 4 && sl->in[4] >= 0 && !int_const(s, sl->in[4], &step)))
        return 0;
    if (start < 0) start += d;
    if (end < 0) end += d;
    start = start < 0 ? 0 : start > d ? d : start;
    end = end < 0 ? 0 : end > d ? d : end;
    return step == 1 && (axis == -1 || axis == r - 1) && start == lo && end == hi;
}

/* Whether tslot t is a float constant (not trained) [1, .., 1, S, D] of rank at most r (so
 * that it broadcasts to x [.., S, D] of rank r) whose rows' halves are equal, bit for bit. */
static int hf_cache(const pp_stage *s, int t, int r, int64_t S, int64_t D)
{
    const float *v = stage_const_matrix(s, t, S, D);
    if (!v || s->t[t].rank > r) return 0;
    for (int64_t row = 0; row < S; row++)
        if (memcmp(v + row * D, v + row * D + D / 2, (size_t)(D / 2) * sizeof(float))) return 0;
    return 1;
}

/* If Neg op o is rotate_half's, fills chain[6] with the pattern's ops (Slice of the first
 * half, Slice of the second, Neg, Concat, Mul by sin, Mul of x by cos; the Add, which becomes
 * the fused op, in *add) and returns x's tslot, cos and sin in cs[2]; else -1. */
static int match_rope(const pp_stage *s, const int *op_of_node, const char *gone, int o, int chain[6], int *add,
                      int cs[2])
{
    const stage_op *neg = &s->ops[o];
    if (neg->op != PP_OP_NEG || neg->nin != 1 || neg->nout != 1 || neg->out[0] < 0) return -1;
    const int sb = stage_producer(s, op_of_node, gone, neg->in[0]);
    if (sb < 0 || s->ops[sb].in[0] < 0 || stage_only_reader(s, op_of_node, neg->in[0], PP_OP_NEG) != o) return -1;
    const int x = s->ops[sb].in[0];
    const tslot *tx = &s->t[x];
    const int r = tx->rank;
    const int64_t D = r ? tx->dims[r - 1] : 0;
    if (tx->dtype != PP_DTYPE_F32 || r != 4 || D % 2 || !slices(s, &s->ops[sb], r, D, D / 2, D))
        return -1;
    const int cc = stage_only_reader(s, op_of_node, neg->out[0], PP_OP_CONCAT);
    int64_t axis;
    if (cc < 0 || s->ops[cc].nin != 2 || s->ops[cc].in[0] != neg->out[0] || s->ops[cc].out[0] < 0 ||
        pp_attr_int(s->ops[cc].attrs, s->ops[cc].nattrs, "axis", 0, &axis, NULL, NULL) || (axis != -1 && axis != r - 1))
        return -1;
    const int half1 = s->ops[cc].in[1], sa = stage_producer(s, op_of_node, gone, half1);
    if (sa < 0 || s->ops[sa].in[0] != x || !slices(s, &s->ops[sa], r, D, 0, D / 2) ||
        stage_only_reader(s, op_of_node, half1, PP_OP_CONCAT) != cc)
        return -1;
    const int rot = s->ops[cc].out[0], ms = stage_only_reader(s, op_of_node, rot, PP_OP_MUL);
    if (ms < 0 || s->ops[ms].out[0] < 0) return -1;
    cs[1] = stage_other_input(&s->ops[ms], rot);
    *add = stage_only_reader(s, op_of_node, s->ops[ms].out[0], PP_OP_ADD);
    if (*add < 0 || s->ops[*add].out[0] < 0) return -1;
    const int xc = stage_other_input(&s->ops[*add], s->ops[ms].out[0]), mc = stage_producer(s, op_of_node, gone, xc);
    if (mc < 0 || s->ops[mc].op != PP_OP_MUL || stage_only_reader(s, op_of_node, xc, PP_OP_ADD) != *add) return -1;
    cs[0] = stage_other_input(&s->ops[mc], x);
    if (cs[0] == x || !hf_cache(s, cs[0], r, tx->dims[r - 2], D) || !hf_cache(s, cs[1], r, tx->dims[r - 2], D) ||
        s->t[s->ops[*add].out[0]].nbytes != tx->nbytes)
        return -1;
    chain[0] = sa, chain[1] = sb, chain[2] = o, chain[3] = cc, chain[4] = ms, chain[5] = mc;
    return x;
}

/* If op o is the Neg of HF's rotate_half, the chain becomes one RotaryEmbedding run by kernel k. */
static void fuse_rope_at(pp_stage *s, const pp_kernel *k, const int *op_of_node, int o, char *gone)
{
    int chain[6], add, cs[2];
    const int x = match_rope(s, op_of_node, gone, o, chain, &add, cs);
    if (x < 0) return;
    /* the Add becomes RotaryEmbedding(x, cos, sin): x and the constants are defined before
     * it, its readers come after; its in and host_in hold 2 + 1 entries (places.c) */
    stage_op *op = &s->ops[add];
    pp_log(PP_LOG_DEBUG, "stage: fused rotate_half '%s' .. '%s' into one RotaryEmbedding", s->ops[chain[0]].name,
           op->name);
    stage_op_become(op, PP_OP_ROTARY_EMBEDDING, k);
    stage_fold_attr(op, (pp_attr){.name = "hf_caches", .type = PP_ATTR_INT, .i = 1});
    op->nin = 3;
    op->in[0] = x;
    op->in[1] = cs[0];
    op->in[2] = cs[1];
    if (op->host_in) {
        op->host_in[0] = NULL;
        for (int i = 1; i < 3; i++) op->host_in[i] = pp_graph_const(s->g, s->t[cs[i - 1]].value)->data;
    }
    for (int i = 0; i < 6; i++) {
        s->t[s->ops[chain[i]].out[0]].view_of = x;   /* unused from now on */
        gone[chain[i]] = 1;
    }
}

pp_status stage_fuse_rope(fuse_ctx *f, pp_error *err)
{
    (void)err;
    stage_fuse_each(f, PP_OP_ROTARY_EMBEDDING, fuse_rope_at);
    return PP_OK;
}
