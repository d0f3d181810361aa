/* Views: a Reshape / Flatten / Squeeze / Unsqueeze of an activation becomes a view of its
 * input (same memory, same gradient memory; no copy) unless its result leaves the stage; so
 * does an identity: a float Cast to its own type, a Dropout of ratio 0. */
#include "stage_fuse.h"

#include <onnxpipe/op_info.h>

/* An op whose result equals its input: a Cast to the input's own type (reshape_to_view
 * checks the dtypes), or a Dropout of ratio 0 whose mask nobody reads (HF's torchscript
 * exports write both in attention); other ops have one output. */
static int identity_op(const pp_stage *s, const stage_op *op)
{
    if (op->op == PP_OP_CAST) return op->nout == 1;
    if (op->op != PP_OP_DROPOUT || op->nin < 2 || !stage_is_const(s, op->in[1], 0.0)) return 0;
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

pp_status stage_fuse_views(fuse_ctx *f, pp_error *err)
{
    (void)err;
    for (int o = 0; o < f->s->nops; o++)
        if (!f->gone[o]) reshape_to_view(f->s, o, f->gone);
    return PP_OK;
}
