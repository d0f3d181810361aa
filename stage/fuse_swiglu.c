/* HF's gated MLP, act(gate) * up with act the Swish that fuse_swish.c made of SiLU, becomes
 * one SwiGLU(gate, up) (ONNX's SwiGLU, opset 28, alpha 1 only: shape_swiglu). */
#include "stage_fuse.h"

#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

/* If op o is a Swish (alpha 1, fuse_swish's) whose result only a Mul by a float of its
 * shape reads (HF's gated MLP: act(gate) * up), makes that Mul SwiGLU(gate, up) and drops
 * the Swish: three passes over [tokens, ffn] forward instead of five, eight backward
 * instead of eleven, and the Swish's output not kept. */
static void fuse_swiglu_at(pp_stage *s, const pp_kernel *swiglu, const int *op_of_node, int o, char *gone)
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

pp_status stage_fuse_swiglu(fuse_ctx *f, pp_error *err)
{
    (void)err;
    stage_fuse_each(f, PP_OP_SWIGLU, fuse_swiglu_at);
    return PP_OK;
}
