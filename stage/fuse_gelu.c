/* GELU as exporters write it becomes one Gelu op: the exact form as exported below opset
 * 20 (PyTorch's F.gelu, the example GPT), five elementwise ops y = (x * (erf(x / sqrt2) + 1))
 * * 0.5 (match_gelu); and the tanh form as HF's gelu_new writes it (GPT-2: eight ops,
 * match_gelu_tanh), as Gelu with approximate = 'tanh'. */
#include "stage_fuse.h"

#include <math.h>
#include <onnxpipe/backend/kernels_backend.h>

/* If op o starts the GELU pattern, fills chain[5] with its ops (Div Erf Add Mul Mul)
 * and returns x's tslot; else -1. */
static int match_gelu(const pp_stage *s, const int *op_of_node, int o, int chain[5])
{
    const stage_op *div = &s->ops[o];
    if (div->op != PP_OP_DIV || div->nin != 2 || div->nout != 1 || div->in[0] < 0 ||
        !stage_is_const(s, div->in[1], sqrt(2.0)))
        return -1;
    int x = div->in[0];
    chain[0] = o;
    if ((chain[1] = stage_only_reader(s, op_of_node, div->out[0], PP_OP_ERF)) < 0) return -1;
    if ((chain[2] = stage_only_reader(s, op_of_node, s->ops[chain[1]].out[0], PP_OP_ADD)) < 0 ||
        !stage_is_const(s, stage_other_input(&s->ops[chain[2]], s->ops[chain[1]].out[0]), 1.0))
        return -1;
    if ((chain[3] = stage_only_reader(s, op_of_node, s->ops[chain[2]].out[0], PP_OP_MUL)) < 0 ||
        stage_other_input(&s->ops[chain[3]], s->ops[chain[2]].out[0]) != x)
        return -1;
    if ((chain[4] = stage_only_reader(s, op_of_node, s->ops[chain[3]].out[0], PP_OP_MUL)) < 0 ||
        !stage_is_const(s, stage_other_input(&s->ops[chain[4]], s->ops[chain[3]].out[0]), 0.5))
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
    if (pw->op != PP_OP_POW || pw->nin != 2 || pw->nout != 1 || pw->in[0] < 0 || !stage_is_const(s, pw->in[1], 3.0))
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
            if (other < 0 || (consts[k] > 0 && !stage_is_const(s, other, consts[k])) || (consts[k] == -1 && other != x))
                return -1;
            if (consts[k] == -2) {   /* h = Mul(x, 0.5), read by this Mul only */
                int h = s->t[other].value >= 0 ? s->g->values[s->t[other].value].producer : -1;
                int ho = h >= 0 && stage_side(s, h) == 0 ? op_of_node[h - s->first] : -1;
                if (ho < 0 || s->ops[ho].op != PP_OP_MUL || stage_other_input(&s->ops[ho], x) < 0 ||
                    !stage_is_const(s, stage_other_input(&s->ops[ho], x), 0.5) ||
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

pp_status stage_fuse_gelu(fuse_ctx *f, pp_error *err)
{
    (void)err;
    pp_stage *s = f->s;
    const int *op_of_node = f->op_of_node;
    char *gone = f->gone;
    const pp_kernel *gelu = pp_kernel_find(PP_OP_GELU, pp_device_get_kind(s->dev), PP_DTYPE_F32);
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
    return PP_OK;
}
