/* A parameter read by several ops of a stage (a weight tied inside it) keeps one gradient
 * per reading op, a "use", through the step, so that the uses are added in one order on
 * every layout: ascending graph node id, whichever stages hold them (pp=1's sum is then
 * pp=4's). Use 0 accumulates into the parameter's own gradient; later ones into buffers
 * after the flat gradient buffer's param_elems. */
#include "stage_places.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/stage_lib.h>

/* Whether op o reads parameter p (its fp32 master or 16-bit copy) for a gradient. */
static int reads_param(const pp_stage *s, const stage_op *op, int p)
{
    if (!op->backward || !op->has_weight) return 0;
    for (int k = 0; k < op->nin; k++)
        if (op->in[k] >= 0 && s->t[op->in[k]].param == p && s->t[op->in[k]].needs_grad) return 1;
    return 0;
}

/* Op order, by node id (a synthetic op, node -1, after its node's: by op index). */
static int before(const pp_stage *s, int a, int b)
{
    int na = s->ops[a].node, nb = s->ops[b].node;
    return na != nb ? na < nb : a < b;
}

pp_status stage_place_uses(pp_stage *s, pp_error *err)
{
    s->uses = calloc((size_t)s->nops + (size_t)s->nparams + 1, sizeof *s->uses);
    if (!s->uses) return PP_NOMEM(err);
    int64_t off = s->param_elems;
    for (int p = 0; p < s->nparams; p++) {
        int first = s->nuses;
        for (int o = 0; o < s->nops; o++) {
            if (!reads_param(s, &s->ops[o], p)) continue;
            int at = s->nuses++;   /* insertion by node id */
            while (at > first && before(s, o, s->uses[at - 1].op)) {
                s->uses[at] = s->uses[at - 1];
                at--;
            }
            s->uses[at] = (stage_use){.param = p, .op = o, .node = s->ops[o].node};
        }
        for (int u = first; u < s->nuses; u++) {
            stage_use *x = &s->uses[u];
            x->offset = u == first ? s->params[p].offset : off;
            if (u == first) continue;
            off += (s->params[p].numel + 15) / 16 * 16;
            stage_op *op = &s->ops[x->op];
            if (!op->grad_at) {
                if (!(op->grad_at = malloc((size_t)op->nin * sizeof *op->grad_at))) return PP_NOMEM(err);
                for (int k = 0; k < op->nin; k++) op->grad_at[k] = -1;
            }
            for (int k = 0; k < op->nin; k++)
                if (op->in[k] >= 0 && s->t[op->in[k]].param == p) op->grad_at[k] = x->offset;
        }
    }
    s->use_elems = off - s->param_elems;
    return PP_OK;
}

int pp_stage_param_uses(pp_stage *s, int value, pp_stage_use *out, int cap)
{
    int n = 0;
    for (int u = 0; u < s->nuses; u++) {
        const stage_use *x = &s->uses[u];
        if (s->params[x->param].value != value) continue;
        if (n < cap) out[n] = (pp_stage_use){.node = x->node, .grad = s->grad_buf + x->offset};
        n++;
    }
    return n;
}

pp_status pp_stage_sum_uses(pp_stage *s, pp_error *err)
{
    for (int u = 1; u < s->nuses; u++) {
        const stage_use *x = &s->uses[u];
        if (x->param == s->uses[u - 1].param)
            PP_CHECK(pp_kernel_accumulate(s->dev, s->grad_buf + s->params[x->param].offset, s->grad_buf + x->offset,
                                          s->params[x->param].numel, err));
    }
    return PP_OK;
}
