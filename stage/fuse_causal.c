/* Attention under a causal mask, where the MatMul kernel can (PP_KCAP_MATMUL_CAUSAL): MatMul
 * + bias [T, T] that is <= -1e4 above its diagonal (fuse_epilogue.c made it one MatMul), then
 * Softmax over the last axis, then MatMul of the probabilities, marks both products (causal_Y,
 * causal_A) and, where its kernel can (PP_KCAP_SOFTMAX_CAUSAL), the Softmax (causal): exp
 * underflows to exactly 0 above the diagonal, so the kernels skip that triangle (the same
 * probabilities and gradients, about half the attention FLOPs and exps); the probabilities
 * may pass through views (a Cast, a Dropout of ratio 0) on the way. */
#include "stage_fuse.h"

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/graph_ir.h>

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

pp_status stage_fuse_causal(fuse_ctx *f, pp_error *err)
{
    (void)err;
    for (int o = 0; (f->mm_caps & PP_KCAP_MATMUL_CAUSAL) && o < f->s->nops; o++)
        if (!f->gone[o]) mark_causal(f->s, f->op_of_node, f->gone, o);
    return PP_OK;
}
