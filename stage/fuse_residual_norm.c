/* Residual + norm: s = Add(x, r) of two activations of one shape, normalised over its last
 * axis by a LayerNormalization (GPT-2, BERT) or an RMSNormalization (fuse_rmsnorm.c's of HF's
 * Llama chain), becomes onnxruntime's SkipLayerNormalization / SkipSimplifiedLayerNormalization
 * (x, r, scale[, bias]) -> (y, -, -, s) at the Add's place: one pass writes the residual
 * stream s and y, and backward adds the norm's gradient to s's own (its other readers')
 * and into x's and r's in the same pass, instead of a norm backward writing ds and an Add
 * backward reading it twice. The kernels run the unfused ops' loops (kernels/cpu/skip_norm.c)
 * or round s as the Add would store it (kernels/cuda/layernorm.cu), so the numbers do not
 * change; under --precision bf16 / fp16 the fusion waits for a native 16-bit kernel (the
 * adapter would normalise s before its rounding). A pass of stage_fuse (fuse.c). */
#include "stage_fuse.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

/* Whether norm op n (LayerNormalization or RMSNormalization) of x of rank r normalises the
 * last axis alone, in fp32 statistics, with *eps its epsilon. */
static int last_axis(const stage_op *n, int r, float *eps)
{
    int64_t axis, stash;
    return !pp_attr_int(n->attrs, n->nattrs, "axis", -1, &axis, NULL, NULL) && (axis == -1 || axis == r - 1) &&
           !pp_attr_int(n->attrs, n->nattrs, "stash_type", 1, &stash, NULL, NULL) && stash == 1 &&
           !pp_attr_float(n->attrs, n->nattrs, "epsilon", 1e-5f, eps, NULL, NULL);
}

/* A trained or constant [d] tensor (an initializer: defined before any op). */
static int param_of(const pp_stage *s, int t, int64_t d)
{
    return t >= 0 && s->t[t].value >= 0 && s->g->values[s->t[t].value].init >= 0 && s->t[t].rank == 1 &&
           s->t[t].dims[0] == d;
}

/* A float activation (no initializer) of x's shape. */
static int activation_like(const pp_stage *s, int t, const tslot *x)
{
    const tslot *a = t >= 0 ? &s->t[t] : NULL;
    return a && a->dtype == PP_DTYPE_F32 && (a->value < 0 || s->g->values[a->value].init < 0) && a->rank == x->rank &&
           !memcmp(a->dims, x->dims, (size_t)x->rank * sizeof x->dims[0]);
}

/* The Add of this stage whose result norm op o normalises, or -1; *eps the norm's epsilon. */
static int match(const pp_stage *s, const int *op_of_node, const char *gone, int o, float *eps)
{
    const stage_op *n = &s->ops[o];
    const int ln = n->op == PP_OP_LAYER_NORMALIZATION;
    if ((!ln && n->op != PP_OP_RMS_NORMALIZATION) || n->nin < 2 || n->nin > (ln ? 3 : 2) || n->in[0] < 0 ||
        n->out[0] < 0 || (n->nout > 1 && n->out[1] >= 0) || (n->nout > 2 && n->out[2] >= 0))
        return -1;
    /* the norm may read a view of the sum (the torchscript export's Cast) of the same rows */
    const int x = stage_base(s, n->in[0]), v = s->t[x].value;
    const tslot *tx = &s->t[x], *tn = &s->t[n->in[0]];
    if (tx->rank < 1 || tn->rank < 1 || tx->nbytes != tn->nbytes || tn->dims[tn->rank - 1] != tx->dims[tx->rank - 1] ||
        !last_axis(n, tn->rank, eps))
        return -1;
    const int64_t d = tx->dims[tx->rank - 1];
    if (!param_of(s, n->in[1], d) || (n->nin > 2 && n->in[2] >= 0 && !param_of(s, n->in[2], d))) return -1;
    const int node = v >= 0 ? s->g->values[v].producer : -1;
    const int a = node >= 0 && stage_side(s, node) == 0 ? op_of_node[node - s->first] : -1;
    if (a < 0 || gone[a] || s->ops[a].op != PP_OP_ADD || s->ops[a].nin != 2 || s->ops[a].nout != 1 ||
        s->ops[a].out[0] != x || !activation_like(s, s->ops[a].in[0], tx) || !activation_like(s, s->ops[a].in[1], tx))
        return -1;
    return a;
}

/* If norm op o reads such an Add, the Add becomes the Skip norm writing both (op o gone). */
static pp_status fuse_at(pp_stage *s, const int *op_of_node, int o, char *gone, pp_error *err)
{
    float eps;
    const int a = match(s, op_of_node, gone, o, &eps);
    if (a < 0) return PP_OK;
    stage_op *n = &s->ops[o], *add = &s->ops[a];
    const pp_op id = n->op == PP_OP_LAYER_NORMALIZATION ? PP_OP_SKIP_LAYER_NORMALIZATION
                                                        : PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION;
    const pp_device_kind kind = pp_device_get_kind(s->dev);
    const pp_kernel *k = pp_kernel_find(id, kind, PP_DTYPE_F32);
    const pp_dtype lp = s->opt.precision;
    if (!k || ((lp == PP_DTYPE_BF16 || lp == PP_DTYPE_F16) && !pp_kernel_native(id, kind, lp))) return PP_OK;
    int *in = realloc(add->in, 4 * sizeof *in), *out = in ? realloc(add->out, 4 * sizeof *out) : NULL;
    if (in) add->in = in;
    if (out) add->out = out;
    const void **host_in = out ? realloc(add->host_in, 4 * sizeof *host_in) : NULL;
    if (host_in) add->host_in = host_in;
    if (!host_in) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    pp_log(PP_LOG_DEBUG, "stage: fused Add '%s' + %s '%s' into one %s", add->name, n->op_type, n->name,
           pp_op_get(id)->name);
    const int sum = add->out[0];
    stage_op_become(add, id, k);
    stage_fold_attr(add, (pp_attr){.name = "epsilon", .type = PP_ATTR_FLOAT, .f = eps});
    add->name = n->name;
    add->nin = id == PP_OP_SKIP_LAYER_NORMALIZATION && n->nin > 2 && n->in[2] >= 0 ? 4 : 3;
    add->in[2] = n->in[1];
    add->host_in[0] = add->host_in[1] = NULL;   /* activations */
    add->host_in[2] = n->host_in ? n->host_in[1] : NULL;
    if (add->nin > 3) {
        add->in[3] = n->in[2];
        add->host_in[3] = n->host_in ? n->host_in[2] : NULL;
    }
    add->nout = 4;
    add->out[0] = n->out[0];
    add->out[1] = add->out[2] = -1;
    add->out[3] = sum;
    gone[o] = 1;
    return PP_OK;
}

pp_status stage_fuse_residual_norm(fuse_ctx *f, pp_error *err)
{
    for (int o = 0; o < f->s->nops; o++)
        if (!f->gone[o]) PP_CHECK(fuse_at(f->s, f->op_of_node, o, f->gone, err));
    return PP_OK;
}
