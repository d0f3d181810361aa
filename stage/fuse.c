/* Op fusion as the stage is placed, so that fewer passes go over the activations: the passes
 * of stage_fuse.h, one pattern each in its own file, run here in order over the collected
 * ops (before gradients and memory are planned); each marks the ops it replaces gone, and
 * those are dropped at the end (their results unused aliases). The order matters where one
 * pass's result is another's pattern: a product's scale and bias first (the attention and
 * causal passes take a scores' MatMul with or without them), Swish before SwiGLU, the views
 * before the passes that look through them, attention before the Transposes it folds itself,
 * the residual norm last (it reads RMSNorm's result). */
#include "stage_fuse.h"

#include <stdlib.h>
#include <onnxpipe/backend/kernels_backend.h>

/* The live ops by node: a fused MatMul sits where its Add or Mul was, under the MatMul's node. */
static pp_status index_ops(fuse_ctx *f, pp_error *err)
{
    (void)err;
    const pp_stage *s = f->s;
    for (int i = 0; i < s->end - s->first; i++) f->op_of_node[i] = -1;
    for (int o = 0; o < s->nops; o++)
        if (!f->gone[o] && s->ops[o].node >= s->first && s->ops[o].node < s->end)
            f->op_of_node[s->ops[o].node - s->first] = o;
    return PP_OK;
}

static pp_status (*const passes[])(fuse_ctx *, pp_error *) = {
    index_ops,
    stage_fuse_epilogue,
    stage_fuse_gelu,
    stage_fuse_swish,
    stage_fuse_swiglu,
    stage_fuse_views,
    index_ops,
    stage_fuse_attention,
    stage_fuse_strided_transposes,
    stage_fuse_rmsnorm,
    stage_fuse_rope,
    stage_fuse_transposed_operands,
    stage_fuse_causal,
    stage_fuse_residual_norm,
};

pp_status stage_fuse(pp_stage *s, pp_error *err)
{
    const pp_kernel *matmul = pp_kernel_find(PP_OP_MATMUL, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    /* under 16-bit precision a product is rounded before its scale and bias are applied, as
     * it is where a cut separates them: no epilogue fusion, so layouts round alike */
    const int narrow = s->opt.precision == PP_DTYPE_BF16 || s->opt.precision == PP_DTYPE_F16;
    const unsigned epilogue = PP_KCAP_MATMUL_ALPHA | PP_KCAP_MATMUL_BIAS;
    if (s->nops < 2) return PP_OK;
    fuse_ctx f = {.s = s, .mm_caps = matmul ? matmul->caps & (narrow ? ~epilogue : ~0u) : 0};
    f.op_of_node = malloc((size_t)(s->end - s->first) * sizeof *f.op_of_node);
    f.gone = calloc((size_t)s->nops, 1);
    pp_status st = PP_OK;
    if (!f.op_of_node || !f.gone) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
        goto done;
    }
    for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) PP_CHECK_GOTO(passes[p](&f, err), st, done);
    int n = 0;
    for (int o = 0; o < s->nops; o++) {
        if (f.gone[o]) {
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
    free(f.op_of_node);
    free(f.gone);
    return st;
}
