/* RMSNorm as HF's Llama family exports it (Pow, ReduceMean, Add eps, Sqrt, Reciprocal or Div,
 * Mul, Mul by the weight: match_rmsnorm) becomes one RMSNormalization op over the last axis. */
#include "stage_fuse.h"

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/graph_ir.h>

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
    if (pw->op != PP_OP_POW || pw->nin != 2 || pw->nout != 1 || pw->in[0] < 0 || !stage_is_const(s, pw->in[1], 2.0))
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
            !stage_is_const(s, s->ops[chain[4]].in[0], 1.0))
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

pp_status stage_fuse_rmsnorm(fuse_ctx *f, pp_error *err)
{
    (void)err;
    pp_stage *s = f->s;
    const pp_kernel *rms = pp_kernel_find(PP_OP_RMS_NORMALIZATION, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    float eps;
    for (int o = 0; rms && o < s->nops; o++) {
        int chain[7], w, x = f->gone[o] ? -1 : match_rmsnorm(s, f->op_of_node, f->gone, o, chain, &w, &eps);
        if (x >= 0) fuse_rmsnorm(s, rms, chain, x, w, eps, f->gone);
    }
    return PP_OK;
}
