/* SiLU as HF's Llama family and torch export it, x * Sigmoid(x), becomes one Swish op
 * (ONNX's Swish, opset 24; alpha 1). */
#include "stage_fuse.h"

#include <onnxpipe/backend/kernels_backend.h>

/* If op o is a Sigmoid of a float x whose result only a Mul by that same x reads (SiLU as
 * HF's Llama family and torch export it), makes that Mul Swish(x) (alpha 1) and drops the
 * Sigmoid: one pass over x forward and one backward, nothing saved but x. */
static void fuse_swish_at(pp_stage *s, const pp_kernel *swish, const int *op_of_node, int o, char *gone)
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

pp_status stage_fuse_swish(fuse_ctx *f, pp_error *err)
{
    (void)err;
    stage_fuse_each(f, PP_OP_SWISH, fuse_swish_at);
    return PP_OK;
}
